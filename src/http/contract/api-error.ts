/**
 * The one error type of the HTTP layer and the Error body it becomes: {code, message, status}, with
 * `details` for validation errors and the request id; bounded in size whatever the request held.
 */

export const ERROR_CODES = {
  invalid_request: 400,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  idempotency_key_in_use: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  request_header_fields_too_large: 431,
  rate_limited: 429,
  key_banned: 429,
  internal_error: 500,
  unavailable: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorDetail {
  field: string;
  problem: string;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details: ErrorDetail[] | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, message: string, options: { details?: ErrorDetail[]; headers?: Record<string, string> } = {}) {
    super(message);
    this.code = code;
    this.status = ERROR_CODES[code];
    this.details = options.details;
    this.headers = options.headers;
  }
}

/** At most this many details are listed; the message says how many there were. */
export const MAX_DETAILS = 10;
/** An error body never exceeds this many bytes, whatever the request held. */
export const MAX_ERROR_BODY_BYTES = 4096;

/**
 * Text taken from the request (a field name, a path), cut to `max` characters with an ellipsis, so an
 * error never echoes more than a little of what it was sent.
 */
export function clip(text: string, max = 64): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  // Never split a surrogate pair.
  return (/[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut) + '…';
}

/**
 * The Error body: code, message, status, at most MAX_DETAILS details and the request id, each part
 * clipped; if echoed characters that need six-byte JSON escapes still take it past
 * MAX_ERROR_BODY_BYTES, details are dropped from the end until it fits (the message, clipped to 400
 * characters, fits on its own).
 */
export function errorBody(err: ApiError, requestId?: string): Record<string, unknown> {
  const body: Record<string, unknown> = { code: err.code, message: clip(err.message, 400), status: err.status };
  const details = err.details?.slice(0, MAX_DETAILS).map((d) => ({ field: clip(d.field), problem: clip(d.problem, 120) }));
  if (details?.length) body.details = details;
  if (requestId) body.requestId = requestId;
  while (details?.length && Buffer.byteLength(JSON.stringify(body)) > MAX_ERROR_BODY_BYTES) {
    details.pop();
    if (details.length === 0) delete body.details;
  }
  return body;
}

/** The 404 for a request no route serves; the path (never the query) is echoed, clipped. */
export function noResourceError(method: string, url: string): ApiError {
  return new ApiError('not_found', `No resource at ${method} ${clip(url.split('?')[0]!)}`);
}
