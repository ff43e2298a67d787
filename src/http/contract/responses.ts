/**
 * Response declarations shared by the routes: what each status means and which headers it carries.
 * Routes serialise with the body schemas given here; the OpenAPI document (openapi.ts) takes the rest:
 * every header is written once, under `components.headers`, every error response once, under
 * `components.responses`, and operations refer to them, so a header or a status means the same
 * wherever it appears.
 */
import { GET_PET_DEPRECATION_HEADERS } from '../../domain/deprecation.ts';

/** An OpenAPI Header Object, and the HTTP field it describes. */
export interface SharedHeader {
  /** The field's name on the wire; the key in `components.headers` may differ (two kinds of `Link`). */
  name: string;
  description: string;
  /** Sent on every answer that declares it (a generated client may then type it as present). */
  required: boolean;
  schema: Record<string, unknown>;
}

/** A count sent in a header: bounded, so a linter (and a client) knows what fits. */
const COUNT = { type: 'integer', format: 'int64', minimum: 0, maximum: Number.MAX_SAFE_INTEGER };

/** The value of a structured or listed header field; the bound is generous, not a promise of size. */
const FIELD = (maxLength = 512) => ({ type: 'string', maxLength });

/** Every header the service documents, keyed by its name in `components.headers`. */
export const HEADERS = {
  'X-Request-Id': {
    name: 'X-Request-Id',
    required: true,
    description:
      "The request's id: the caller's own `X-Request-Id` when it is 1 to 128 characters of letters, digits " +
      "and `._:@+=/-`, otherwise one the service made. It is in the service's log line for the request.",
    schema: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:@+=/-]+$' },
  },
  'X-RateLimit-Limit': {
    name: 'X-RateLimit-Limit',
    required: true,
    description:
      'Request quota of the window nearest exhaustion (lowest remaining; a tie goes to the longer window). ' +
      "For a valid key its plan's per-minute or per-day limit, otherwise the per-address limit for requests " +
      'without a valid key.',
    schema: COUNT,
  },
  'X-RateLimit-Remaining': { name: 'X-RateLimit-Remaining', required: true, description: 'Requests left in that window.', schema: COUNT },
  'X-RateLimit-Reset': {
    name: 'X-RateLimit-Reset',
    required: true,
    description: 'Unix time, in whole seconds, when that window resets.',
    schema: COUNT,
  },
  'RateLimit-Policy': {
    name: 'RateLimit-Policy',
    required: true,
    description: 'IETF RateLimit-Policy field describing every window, e.g. `"minute";q=60;w=60, "day";q=1000;w=86400`.',
    schema: FIELD(),
  },
  RateLimit: {
    name: 'RateLimit',
    required: true,
    description:
      'IETF RateLimit field: remaining requests and seconds to reset of every window, e.g. `"minute";r=59;t=41, "day";r=999;t=50441`.',
    schema: FIELD(),
  },
  'Retry-After': {
    name: 'Retry-After',
    required: true,
    description:
      'Whole seconds to wait before retrying: until the refusing window resets or the ban ends (429), or a short ' +
      'pause while storage is unreachable (503), or until the first request with the same `Idempotency-Key` may be taken ' +
      'over if it has not completed by then (409).',
    schema: COUNT,
  },
  'WWW-Authenticate': {
    name: 'WWW-Authenticate',
    required: true,
    description: 'Always `Bearer realm="petstore"`.',
    schema: { type: 'string', enum: ['Bearer realm="petstore"'] },
  },
  Allow: {
    name: 'Allow',
    required: true,
    description: 'The methods this path supports, e.g. `GET, HEAD, POST, OPTIONS`.',
    schema: { type: 'string', maxLength: 128, pattern: '^[A-Z]+(?:, [A-Z]+)*$' },
  },
  Deprecation: {
    name: 'Deprecation',
    required: true,
    description: `RFC 9745: when the operation was deprecated (\`${GET_PET_DEPRECATION_HEADERS.Deprecation}\`).`,
    schema: { type: 'string', enum: [GET_PET_DEPRECATION_HEADERS.Deprecation] },
  },
  Sunset: {
    name: 'Sunset',
    required: true,
    description: `RFC 8594: when the operation is removed (\`${GET_PET_DEPRECATION_HEADERS.Sunset}\`).`,
    schema: { type: 'string', enum: [GET_PET_DEPRECATION_HEADERS.Sunset] },
  },
  DeprecationLink: {
    name: 'Link',
    required: true,
    description:
      'The replacement operation (`rel="successor-version"`) and its documentation (`rel="deprecation"`), e.g. ' +
      '`</v1/pets>; rel="successor-version", </docs#operation/getPet>; rel="deprecation"`: the references start with ' +
      'the public base URL (`PUBLIC_BASE_URL`) when the operator set one.',
    schema: FIELD(),
  },
  NextPageLink: {
    name: 'Link',
    required: false,
    description:
      'RFC 8288 link to the next page, e.g. `</v1/pets?limit=20&cursor=...>; rel="next"` (same filters and limit, plus an ' +
      'opaque `cursor`); absent on the last page. Resolve the reference against the URL of the request: it starts with ' +
      'the public base URL (`PUBLIC_BASE_URL`) when the operator set one, otherwise it is a path starting with `/v1`.',
    schema: FIELD(),
  },
  Location: {
    name: 'Location',
    required: true,
    description:
      "The created pet's URL, `/v1/pets/{id}`, or the public base URL (`PUBLIC_BASE_URL`) followed by `/pets/{id}` " +
      'when the operator set one. Resolve it against the URL of the request.',
    schema: { type: 'string', format: 'uri-reference', maxLength: 512 },
  },
  ETag: {
    name: 'ETag',
    required: true,
    description:
      "Strong entity tag of this representation: a digest of the body (and of a list page's next link), the same on every " +
      'instance, with `-br` or `-gzip` before the closing quote when the body is compressed, since each content coding is ' +
      'a representation of its own. Send it back in `If-None-Match` to get `304 Not Modified` while it still names ' +
      'the current representation.',
    schema: { type: 'string', minLength: 3, maxLength: 64, pattern: '^"[A-Za-z0-9_-]+"$' },
  },
  'Idempotent-Replayed': {
    name: 'Idempotent-Replayed',
    required: false,
    description: 'Present when this is the stored response of an earlier request with the same Idempotency-Key.',
    schema: { type: 'string', enum: ['true'] },
  },
} as const satisfies Record<string, SharedHeader>;

export type HeaderKey = keyof typeof HEADERS;

/** An OpenAPI Parameter Object for a request header, kept under `components.parameters`. */
export interface SharedParameter {
  name: string;
  in: 'header';
  description: string;
  required: false;
  schema: Record<string, unknown>;
}

/** Every request header the service documents, keyed by its name in `components.parameters`. */
export const PARAMETERS = {
  IfNoneMatch: {
    name: 'If-None-Match',
    in: 'header',
    required: false,
    description:
      'Entity tags of representations the client already has (RFC 9110 §13.1.2), e.g. the `ETag` of an earlier answer, ' +
      'a list such as `"a", "b"`, weak tags (`W/"a"`, compared by their opaque part) or `*`. When one names the ' +
      'representation the service would send, the answer is `304 Not Modified` without a body; the request is ' +
      'authenticated and counted against the rate limits like any other.',
    schema: { type: 'string', maxLength: 8192 },
  },
} as const satisfies Record<string, SharedParameter>;

export type ParameterKey = keyof typeof PARAMETERS;

/**
 * How a route's schema names the shared request headers it reads: a key @fastify/swagger copies onto
 * the operation as it is (an `x-` extension), which openapi.ts turns into `$ref` parameters. Not a
 * `headers` schema, which Fastify would validate on every request for a field the route only compares.
 */
export const PARAMETER_MARK = 'x-shared-parameters';

/** The route schema part of an operation that answers `If-None-Match`. */
export function conditionalRequest(): { [PARAMETER_MARK]: ParameterKey[] } {
  return { [PARAMETER_MARK]: ['IfNoneMatch'] };
}

/**
 * How a route's response names a shared header for @fastify/swagger, which copies each entry of a
 * response's `headers` into the document as it is; openapi.ts turns it into a `$ref`.
 */
export const HEADER_MARK = 'x-shared-header';

const RATE_LIMIT: HeaderKey[] = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit'];

export interface ResponseOptions {
  /** Headers of this response besides those its status always carries. */
  headers?: HeaderKey[];
  /** Every answer of the operation carries the deprecation headers (getPet). */
  deprecated?: boolean;
}

/**
 * The headers an answer of a status carries. A 5xx can end a request before its key, and so its
 * rate-limit window, is known (a storage outage while looking up the key): there the rate-limit
 * headers are not promised, as the 5xx descriptions say.
 */
export function headersFor(status: number, options: ResponseOptions = {}): HeaderKey[] {
  return [
    'X-Request-Id',
    ...(status < 500 ? RATE_LIMIT : []),
    ...(status === 409 || status === 429 || status === 503 ? (['Retry-After'] as const) : []),
    ...(status === 401 ? (['WWW-Authenticate'] as const) : []),
    ...(status === 405 ? (['Allow'] as const) : []),
    ...(options.deprecated ? (['Deprecation', 'Sunset', 'DeprecationLink'] as const) : []),
    ...(options.headers ?? []),
  ];
}

function headerMarks(keys: HeaderKey[]): Record<string, { [HEADER_MARK]: HeaderKey }> {
  return Object.fromEntries(keys.map((key) => [HEADERS[key].name, { [HEADER_MARK]: key }]));
}

export function json(status: number, ref: string, description: string, options: ResponseOptions = {}) {
  return { description, headers: headerMarks(headersFor(status, options)), $ref: `${ref}#` };
}

/**
 * The 304 of an operation that answers `If-None-Match`: no body, and the headers its 200 would carry
 * that RFC 9110 §15.4.5 keeps (the tag, `Link`, the deprecation fields) besides those of every answer.
 */
export function notModified(options: ResponseOptions = {}) {
  return {
    description:
      "Not Modified: `If-None-Match` names the representation that would be sent, so the client's copy is current. No body; " +
      'the headers are those of the 200, the `ETag` among them.',
    type: 'null',
    headers: headerMarks(headersFor(304, { ...options, headers: [...(options.headers ?? []), 'ETag'] })),
  };
}

/** One error status: what it means, and its name as a shared response of the document. */
interface ErrorStatus {
  name: string;
  description: string;
}

const SERVER_ERROR_HEADERS =
  ' The rate-limit headers are sent too when the request got as far as its rate limit; a failure while the key ' +
  'is looked up comes without them.';

/** Said of the requests refused before any key is read. */
const ADDRESS_HEADERS =
  'Such a request is refused before any key is read: its answer carries the rate-limit headers of the client address, ' +
  'and it is counted against that address like a request without a key.';

export const ERROR_STATUSES: Record<number, ErrorStatus> = {
  400: {
    name: 'BadRequest',
    description:
      'Invalid request (code `invalid_request`): a parameter or body the operation does not accept, with a `details` list ' +
      'naming each field and problem; or a request that is not well-formed HTTP/1.1 (no `Host`, a malformed request line ' +
      'or header, a body without valid framing), answered without `details`. ' +
      ADDRESS_HEADERS,
  },
  401: {
    name: 'Unauthorized',
    description: 'Missing, malformed, unknown, revoked or other-environment API key (code `unauthorized`).',
  },
  404: { name: 'NotFound', description: 'No such resource (code `not_found`).' },
  405: {
    name: 'MethodNotAllowed',
    description:
      'The answer to any method this path does not support (code `method_not_allowed`); `Allow` lists those it does. ' +
      'OpenAPI declares answers per operation, so it is listed on each operation of the path.',
  },
  408: {
    name: 'RequestTimeout',
    description:
      'The request was not received in time (code `request_timeout`): its headers within `HEADERS_TIMEOUT_MS` (10 s by ' +
      'default) or the whole of it within `REQUEST_TIMEOUT_MS` (30 s). The connection is closed. A request whose body ' +
      'stopped coming after it was admitted keeps the rate-limit headers of the key it was counted against; one whose ' +
      'headers did not all come does not. ' +
      ADDRESS_HEADERS +
      ' A connection that sent nothing is closed without an answer.',
  },
  409: {
    name: 'IdempotencyKeyInUse',
    description:
      'A request with the same `Idempotency-Key` is still in progress (code `idempotency_key_in_use`); retry after `Retry-After` seconds.',
  },
  410: { name: 'Gone', description: 'The operation has passed its sunset date and is removed (code `gone`).' },
  413: { name: 'PayloadTooLarge', description: 'Request body larger than 64 KiB (code `payload_too_large`).' },
  415: { name: 'UnsupportedMediaType', description: 'Request body is not `application/json` (code `unsupported_media_type`).' },
  422: {
    name: 'IdempotencyKeyReused',
    description: 'The `Idempotency-Key` was already used with a different request body (code `idempotency_key_reused`).',
  },
  429: {
    name: 'TooManyRequests',
    description:
      'Too many requests: code `rate_limited` when a window is exhausted, `key_banned` while the key is ' +
      'temporarily banned for sending on after 429s. Back off exponentially and honour `Retry-After`.',
  },
  431: {
    name: 'RequestHeaderFieldsTooLarge',
    description:
      'The request headers are larger than the server accepts, 16 KiB in all (code `request_header_fields_too_large`). The ' +
      'connection is closed. ' +
      ADDRESS_HEADERS,
  },
  500: {
    name: 'InternalError',
    description: 'Unexpected server error (code `internal_error`); the body reveals nothing internal.' + SERVER_ERROR_HEADERS,
  },
  503: {
    name: 'Unavailable',
    description: 'Storage temporarily unreachable (code `unavailable`); retry after `Retry-After` seconds.' + SERVER_ERROR_HEADERS,
  },
};

/** Statuses answered before a request reaches its route: never with the route's own headers (getPet's deprecation). */
const BEFORE_ROUTING = new Set([408, 431]);

/** The error responses of a route, each with the ErrorBody and the headers it carries. */
export function errors(statuses: number[], options: ResponseOptions = {}) {
  return Object.fromEntries(
    statuses.map((s) => [s, json(s, 'ErrorBody', ERROR_STATUSES[s]!.description, BEFORE_ROUTING.has(s) ? {} : options)]),
  );
}

/**
 * Errors of any request, whatever it asks for: refused before it is read as one of the API's (not
 * well-formed HTTP, too slow, headers too large).
 */
export const UNREAD_ERRORS = [400, 408, 431];

/** Errors any /v1 request with a key can get, whatever the operation. */
export const COMMON_ERRORS = [...UNREAD_ERRORS, 401, 429, 500, 503];

/** Errors of the routes that need no key: a key sent anyway is still looked up, and counted against. */
export const KEYLESS_ERRORS = [...UNREAD_ERRORS, 429, 500, 503];
