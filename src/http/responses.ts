/**
 * Response declarations shared by the routes: what each status means and which headers it carries.
 * They drive both serialisation and the OpenAPI document.
 */
import { GET_PET_DEPRECATION_HEADERS } from '../domain/deprecation.ts';

type HeaderDoc = Record<string, { type: string; description: string; pattern?: string; enum?: string[] }>;

export const RATE_LIMIT_HEADERS: HeaderDoc = {
  'X-RateLimit-Limit': {
    type: 'integer',
    description:
      'Request quota of the window nearest exhaustion (lowest remaining; a tie goes to the longer window). ' +
      "For a valid key its plan's per-minute or per-day limit, otherwise the per-address limit for requests " +
      'without a valid key.',
  },
  'X-RateLimit-Remaining': { type: 'integer', description: 'Requests left in that window.' },
  'X-RateLimit-Reset': { type: 'integer', description: 'Unix time, in whole seconds, when that window resets.' },
  'RateLimit-Policy': {
    type: 'string',
    description: 'IETF RateLimit-Policy field describing every window, e.g. `"minute";q=60;w=60, "day";q=1000;w=86400`.',
  },
  RateLimit: {
    type: 'string',
    description:
      'IETF RateLimit field: remaining requests and seconds to reset of every window, e.g. `"minute";r=59;t=41, "day";r=999;t=50441`.',
  },
};

const RETRY_AFTER: HeaderDoc = {
  'Retry-After': { type: 'integer', description: 'Whole seconds until the refusing window resets (or the ban ends).' },
};

const DEPRECATION_HEADERS: HeaderDoc = {
  Deprecation: {
    type: 'string',
    description: `RFC 9745: when the operation was deprecated (\`${GET_PET_DEPRECATION_HEADERS.Deprecation}\`).`,
  },
  Sunset: { type: 'string', description: `RFC 8594: when the operation is removed (\`${GET_PET_DEPRECATION_HEADERS.Sunset}\`).` },
  Link: {
    type: 'string',
    description: 'The replacement operation (`rel="successor-version"`) and its documentation (`rel="deprecation"`).',
  },
};

export interface ResponseOptions {
  headers?: HeaderDoc;
  deprecated?: boolean;
}

const REQUEST_ID: HeaderDoc = {
  'X-Request-Id': {
    type: 'string',
    description:
      "The request's id: the caller's own `X-Request-Id` when it is 1 to 128 characters of letters, digits " +
      "and `._:@+=/-`, otherwise one the service made. It is in the service's log line for the request.",
  },
};

function headersFor(status: number, options: ResponseOptions): HeaderDoc {
  return {
    ...REQUEST_ID,
    ...RATE_LIMIT_HEADERS,
    ...(status === 429 || status === 503 || status === 409 ? RETRY_AFTER : {}),
    ...(status === 401 ? { 'WWW-Authenticate': { type: 'string', description: 'Always `Bearer realm="petstore"`.' } } : {}),
    ...(status === 405 ? { Allow: { type: 'string', description: 'The methods this path supports.' } } : {}),
    ...(options.deprecated ? DEPRECATION_HEADERS : {}),
    ...options.headers,
  };
}

export function json(status: number, ref: string, description: string, options: ResponseOptions = {}) {
  return { description, headers: headersFor(status, options), $ref: `${ref}#` };
}

export function empty(status: number, description: string, options: ResponseOptions = {}) {
  return { description, headers: headersFor(status, options), type: 'null' };
}

const ERROR_MEANINGS: Record<number, string> = {
  400: 'Invalid request: the `details` list names each field and problem (code `invalid_request`).',
  401: 'Missing, malformed, unknown, revoked or other-environment API key (code `unauthorized`).',
  404: 'No such resource (code `not_found`).',
  405: 'Method not supported on this path (code `method_not_allowed`); `Allow` lists the supported ones.',
  409: 'A request with the same `Idempotency-Key` is still in progress (code `idempotency_key_in_use`); retry after `Retry-After` seconds.',
  422: 'The `Idempotency-Key` was already used with a different request body (code `idempotency_key_reused`).',
  410: 'The operation has passed its sunset date and is removed (code `gone`).',
  413: 'Request body larger than 64 KiB (code `payload_too_large`).',
  415: 'Request body is not `application/json` (code `unsupported_media_type`).',
  429:
    'Too many requests: code `rate_limited` when a window is exhausted, `key_banned` while the key is ' +
    'temporarily banned for sending on after 429s. Back off exponentially and honour `Retry-After`.',
  500: 'Unexpected server error (code `internal_error`); the body reveals nothing internal.',
  503: 'Storage temporarily unreachable (code `unavailable`); retry after `Retry-After` seconds.',
};

/** The error responses of a route, each with the Error body and the headers it carries. */
export function errors(statuses: number[], options: ResponseOptions = {}) {
  return Object.fromEntries(statuses.map((s) => [s, json(s, 'Error', ERROR_MEANINGS[s]!, options)]));
}

/** Errors any /v1 request can get, whatever the operation. */
export const COMMON_ERRORS = [401, 429, 500, 503];
