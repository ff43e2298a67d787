/**
 * The one error type of the HTTP layer and the one mapping of every failure, the framework's
 * included, to the spec's Error body {code, message, status}.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { StorageUnavailableError } from '../storage/errors.ts';
import { normaliseAddress } from './client-address.ts';
import { REQUEST_ID_HEADER } from './request-id.ts';
import { applyBaselineHeaders, BASELINE_HEADERS } from './security-headers.ts';

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

  constructor(code: ErrorCode, message: string, details?: ErrorDetail[], headers?: Record<string, string>) {
    super(message);
    this.code = code;
    this.status = ERROR_CODES[code];
    this.details = details;
    this.headers = headers;
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

interface AjvLikeError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** Turns schema validation errors into details that name each field and say what is wrong with it. */
function validationDetails(errors: readonly AjvLikeError[], part: string): ErrorDetail[] {
  return errors.slice(0, MAX_DETAILS).map((e) => {
    const path = e.instancePath.replace(/^\//, '').replaceAll('/', '.');
    if (e.keyword === 'required') return { field: joinField(path, String(e.params.missingProperty)), problem: 'is required' };
    if (e.keyword === 'additionalProperties') {
      return { field: joinField(path, String(e.params.additionalProperty)), problem: 'is not a field of this resource' };
    }
    if (e.keyword === 'pattern' && e.params.pattern === '\\S') return { field: path, problem: 'must not be only white space' };
    return { field: path || part, problem: e.message ?? 'is invalid' };
  });
}

const joinField = (parent: string, child: string): string => (parent ? `${parent}.${child}` : child);

const PART_NAMES: Record<string, string> = { body: 'body', querystring: 'query', params: 'path' };

/** Maps a framework error (or anything thrown) to an ApiError. */
export function toApiError(error: FastifyError | ApiError | Error): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof StorageUnavailableError) {
    return new ApiError('unavailable', 'The service is temporarily unavailable; retry shortly', undefined, { 'Retry-After': '2' });
  }
  const fe = error as FastifyError & { validationContext?: string };
  if (fe.validation) {
    const part = PART_NAMES[fe.validationContext ?? ''] ?? 'request';
    const found = fe.validation as AjvLikeError[];
    const details = validationDetails(found, part);
    const summary = details.slice(0, 3).map((d) => `${clip(d.field)} ${d.problem}`).join('; ');
    const more = found.length > 3 ? ` (and ${found.length - 3} more${found.length > MAX_DETAILS ? `; the first ${MAX_DETAILS} are in details` : ''})` : '';
    return new ApiError('invalid_request', `Invalid ${part}: ${summary}${more}`, details);
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large', 'Request body is larger than 64 KiB');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', 'Request body must be application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_request', 'Request body is empty; a JSON object is required');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('invalid_request', 'Content-Length does not match the request body');
  }
  const status = fe.statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    // A client error the framework found that has no code of its own above (e.g. a bad encoding).
    return new ApiError('invalid_request', 'The request could not be understood');
  }
  return new ApiError('internal_error', 'Internal server error');
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  if (error.headers) reply.headers(error.headers);
  return reply.code(error.status).type('application/json').send(errorBody(error, reply.request.id));
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const apiError = toApiError(error);
    if (apiError.code === 'unavailable') request.log.warn({ err: error.cause ?? error }, 'storage unavailable');
    else if (apiError.status >= 500) request.log.error({ err: error }, 'request failed');
    return sendError(reply, apiError);
  });
}

/** How long a socket answered after CONNECT may take to close before it is destroyed. */
const DETACHED_SOCKET_TIMEOUT_MS = 5000;

/** Where the answers written outside the router (below) are logged and counted, like every other answer. */
export type UnroutedAnswerRecorder = (answer: { requestId: string; method: string | null; status: number; client: string | undefined }) => void;

/**
 * The answers written before or outside the router: no route hook runs for them, so each sets the
 * headers every answer carries (request id, BASELINE_HEADERS) and reports itself to `record`.
 */
export function unroutedAnswers(record: UnroutedAnswerRecorder, apiMethods: () => string) {
  /** Writes an Error answer directly on a socket that never reached the router, then closes it. */
  function writeErrorAndClose(socket: Socket, apiError: ApiError, method: string | null, extraHeaders = ''): void {
    // No request was parsed, so there is no caller's id to keep: a new one still lets the answer be
    // matched with its log line.
    const requestId = randomUUID();
    const body = JSON.stringify(errorBody(apiError, requestId));
    const baseline = Object.entries(BASELINE_HEADERS).map(([name, value]) => `${name}: ${value}\r\n`).join('');
    socket.end(
      `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status]}\r\n${REQUEST_ID_HEADER}: ${requestId}\r\n${baseline}` +
        `Cache-Control: no-store\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `${extraHeaders}Connection: close\r\n\r\n${body}`,
    );
    record({ requestId, method, status: apiError.status, client: socket.remoteAddress && normaliseAddress(socket.remoteAddress) });
  }

  return {
    /**
     * Errors Node's HTTP parser finds before there is a request (oversized headers, a malformed request
     * line, a timed-out request): answered on the raw socket, still in the Error shape, then closed.
     */
    clientError(error: Error & { code?: string }, socket: Socket & { _httpMessage?: { headersSent: boolean } | null }): void {
      // A request already being answered (a malformed chunk in the middle of its body) cannot get a
      // second answer on the same connection: it is cut.
      if (!socket.writable || socket._httpMessage?.headersSent) {
        socket.destroy();
        return;
      }
      const apiError =
        error.code === 'HPE_HEADER_OVERFLOW'
          ? new ApiError('request_header_fields_too_large', 'Request headers are larger than the server accepts')
          : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
            ? new ApiError('request_timeout', 'The request was not received in time')
            : new ApiError('invalid_request', 'Malformed HTTP request');
      writeErrorAndClose(socket, apiError, null);
    },

    /**
     * CONNECT (tunnelling) is handed by Node to a separate event, never to the router; without an answer
     * the socket would just be dropped. It gets a 405 in the Error shape instead.
     */
    connect(socket: Socket): void {
      if (!socket.writable) return void socket.destroy();
      writeErrorAndClose(socket, new ApiError('method_not_allowed', 'CONNECT is not supported by this service'), 'CONNECT', `Allow: ${apiMethods()}\r\n`);
      // The socket has left the HTTP server: nothing reads it any more, so bytes the client sent after
      // its request (a body, a tunnel's first packets) would keep it from ever seeing the client's FIN
      // and closing, and the server from ever finishing a close. They are discarded, and since the
      // server's timeouts no longer apply to it, it is given one of its own.
      socket.resume();
      socket.setTimeout(DETACHED_SOCKET_TIMEOUT_MS, () => socket.destroy());
    },

    /** Errors Fastify meets before routing, such as a path with invalid percent-encoding. */
    frameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
      reply.header(REQUEST_ID_HEADER, request.id);
      applyBaselineHeaders(reply);
      // Not routed, so not known to be outside the API: kept by no cache, like the API's answers.
      reply.header('Cache-Control', 'no-store');
      const apiError =
        error.code === 'FST_ERR_BAD_URL' ? new ApiError('invalid_request', 'The request path is not valid percent-encoded text') : toApiError(error);
      void sendError(reply, apiError);
      record({ requestId: request.id, method: request.method, status: apiError.status, client: request.client });
    },
  };
}
