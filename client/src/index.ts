/**
 * A typed client for the pet adoption API. Its types come from the service's OpenAPI document
 * (schema.ts is generated from openapi.json by `npm run client:types`), with the two int64 fields
 * read as bigint so that every id and category id is exact.
 *
 * - listPets(): an async iterator over every pet, following `Link: rel="next"` page by page.
 * - createPet(): sends an Idempotency-Key (a new UUID unless one is given), so its retries can never
 *   create a second pet.
 * - getPet(): the deprecated single read.
 * - Errors are PetstoreError with the service's `code`, `status` and `requestId`.
 * - Retries: 429 (rate_limited), 503, 409 (idempotency key in use), network failures and attempts
 *   that time out are retried with exponential backoff and full jitter, waiting at least
 *   `Retry-After` (seconds or an HTTP date); a ban (key_banned), a wait longer than maxDelayMs and
 *   every other error are not retried.
 *
 * It uses only what Node.js, browsers and Deno share (fetch, Web Crypto, AbortSignal, URL), so that
 * one build runs in all of them and in bundlers: client/tsconfig.json compiles it on its own, with the
 * language's and the web platform's types (lib ES2022 and DOM) and no Node.js types, so that a
 * Node-only API (Buffer, process, node:*) does not compile.
 */
// Named .js, not .ts: the declaration files keep the specifier as written, and the package ships
// schema.d.ts beside index.d.ts, which a consumer's compiler finds for ./schema.js.
import type { components } from './schema.js';

type Schemas = components['schemas'];
export type PetStatus = Schemas['PetStatus'];
export type Pet = Omit<Schemas['Pet'], 'id' | 'categoryId'> & { id: bigint; categoryId: bigint };
/** status may be left out: the service defaults it to `available`. */
export type NewPet = Omit<Schemas['NewPet'], 'categoryId'> & { categoryId: bigint | number };
export type ErrorBody = Schemas['ErrorBody'];
/**
 * The service's error codes, plus two of the client's own: `http_error` for an answer that is not in
 * the service's Error shape (a proxy's page, say) and `network_error` when no answer came at all.
 */
export type ErrorCode = ErrorBody['code'] | 'http_error' | 'network_error';

/** What a PetstoreError is made from: the answer's status and Error body, and what the client knows besides. */
export interface PetstoreErrorInit {
  status: number;
  code: ErrorCode;
  message: string;
  requestId?: string | undefined;
  retryAfter?: number | undefined;
  details?: ErrorBody['details'] | undefined;
  /** The failure behind a `network_error`. */
  cause?: unknown;
}

export class PetstoreError extends Error {
  /** The HTTP status, or 0 when no answer came (`network_error`). */
  readonly status: number;
  readonly code: ErrorCode;
  readonly requestId: string | undefined;
  /** Seconds the service asked to wait (Retry-After), when it did. */
  readonly retryAfter: number | undefined;
  readonly details: ErrorBody['details'] | undefined;

  constructor(init: PetstoreErrorInit) {
    super(init.message, { cause: init.cause });
    this.name = 'PetstoreError';
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.retryAfter = init.retryAfter;
    this.details = init.details;
  }
}

export interface RetryOptions {
  /** Attempts after the first (default 4). */
  retries?: number;
  /** First backoff step in ms (default 200), doubled each attempt. */
  baseDelayMs?: number;
  /**
   * Longest single wait in ms (default 65,000, so that a minute window's Retry-After is waited
   * for); a longer Retry-After, such as a day window's, is not waited for and its error is thrown.
   */
  maxDelayMs?: number;
  /** How long one attempt may take before it is abandoned and retried, in ms (default 30,000). */
  timeoutMs?: number;
}

export interface ClientOptions extends RetryOptions {
  /**
   * Where the API is: either the URL whose path ends in `/v1`, as the API's servers name it
   * (`https://api.example.com/v1`), or the origin (and any path prefix) in front of it
   * (`https://api.example.com`), to which `/v1` is added. In a browser it may be relative to the page.
   */
  baseUrl: string | URL;
  apiKey: string;
  /** For tests and custom transports. */
  fetch?: typeof fetch;
  /** How to wait between attempts (default: a timer). */
  sleep?: (ms: number) => Promise<void>;
  /** Source of jitter in [0, 1) (default Math.random). */
  random?: () => number;
}

const INT64_FIELDS = new Set(['id', 'categoryId']);

/**
 * JSON with the int64 fields as bigint, read from each number's source text (JSON.parse source text
 * access), and every other number as a plain number. A runtime without source text access has only
 * the rounded number: it is taken while it is still exact, and refused beyond 2^53 - 1, so that an id
 * is never silently another pet's.
 */
function parseJson(text: string): unknown {
  return JSON.parse(text, (key: string, value: unknown, context?: { source?: string }) => {
    if (typeof value !== 'number' || !INT64_FIELDS.has(key)) return value;
    if (context?.source !== undefined) return BigInt(context.source);
    if (Number.isSafeInteger(value)) return BigInt(value);
    throw new RangeError(
      `${key} ${value} is beyond 2^53 - 1, and this runtime's JSON.parse cannot read it exactly (no source text access)`,
    );
  });
}

/** JSON.rawJSON (ES2026; Node.js 21+, Deno, current browsers), which TypeScript's libraries do not declare yet. */
const rawJSON = (JSON as unknown as { rawJSON?: (text: string) => unknown }).rawJSON;

/**
 * JSON with bigint values written as exact JSON numbers; without JSON.rawJSON, as plain numbers while
 * they are exact, and refused beyond (JSON.stringify would throw on a bigint anyway).
 */
function stringifyJson(value: unknown): string {
  return JSON.stringify(value, (key, v: unknown) => {
    if (typeof v !== 'bigint') return v;
    if (rawJSON) return rawJSON(v.toString());
    if (v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
    throw new RangeError(`${key} ${v} is beyond 2^53 - 1, and this runtime's JSON.stringify cannot write it exactly (no JSON.rawJSON)`);
  });
}

/**
 * A new Idempotency-Key: a random UUID. crypto.randomUUID exists only in secure contexts (https: or
 * localhost pages); crypto.getRandomValues everywhere, so a page served over plain http builds the
 * same version 4 UUID from it.
 */
function newIdempotencyKey(): string {
  const { crypto } = globalThis;
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6]! & 0x0f) | 0x40; // version 4
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 9562 variant
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The URL every path is relative to: the base URL itself when its path ends in `/v1` (the form the
 * API's servers list gives), otherwise the base URL with `/v1` added (the bare origin callers have
 * always passed). Query and fragment are not part of a base URL and are dropped.
 */
export function apiRoot(baseUrl: string | URL): string {
  // In a browser a relative base URL (`/v1`, say) is the page's own server; elsewhere it must be absolute.
  const url = new URL(baseUrl, (globalThis as { location?: { href: string } }).location?.href);
  const path = url.pathname.replace(/\/+$/, '');
  return `${url.origin}${/\/v1$/.test(path) ? path : `${path}/v1`}`;
}

const RETRYABLE = new Set([409, 429, 503]);

export class PetstoreClient {
  /** Where the API's paths start: an absolute URL whose path ends in /v1, without a trailing slash. */
  readonly #apiRoot: string;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #random: () => number;
  readonly #retries: number;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #timeoutMs: number;

  constructor(options: ClientOptions) {
    this.#apiRoot = apiRoot(options.baseUrl);
    this.#apiKey = options.apiKey;
    // Looked up at each call and called as a plain function: browsers refuse a fetch called as a
    // method of another object (Illegal invocation), and a page may replace fetch after this runs.
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.#random = options.random ?? Math.random;
    this.#retries = options.retries ?? 4;
    this.#baseDelayMs = options.baseDelayMs ?? 200;
    this.#maxDelayMs = options.maxDelayMs ?? 65_000;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** Every pet, in ascending id order, fetched a page at a time. */
  async *listPets(query: { status?: PetStatus; limit?: number } = {}): AsyncGenerator<Pet> {
    const params = new URLSearchParams();
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    if (query.status) params.set('status', query.status);
    let next: string | undefined = `${this.#apiRoot}/pets${params.size ? `?${params}` : ''}`;
    while (next) {
      const { body, headers } = await this.#request('GET', next);
      for (const pet of body as Pet[]) yield pet;
      const link = nextLink(headers.get('link'));
      // The link may be relative (this service sends `/v1/pets?...`) or absolute.
      next = link === undefined ? undefined : new URL(link, next).toString();
    }
  }

  /** Creates a pet; safe to retry, since every attempt carries the same Idempotency-Key. */
  async createPet(pet: NewPet, options: { idempotencyKey?: string } = {}): Promise<Pet & { replayed: boolean }> {
    const idempotencyKey = options.idempotencyKey ?? newIdempotencyKey();
    const { body, headers } = await this.#request('POST', `${this.#apiRoot}/pets`, stringifyJson(pet), {
      'idempotency-key': idempotencyKey,
    });
    return { ...(body as Pet), replayed: headers.get('idempotent-replayed') === 'true' };
  }

  /** @deprecated The service removes this operation on 5 December 2030; use listPets. */
  async getPet(id: bigint | number): Promise<Pet> {
    return (await this.#request('GET', `${this.#apiRoot}/pets/${encodeURIComponent(String(id))}`)).body as Pet;
  }

  async #request(method: string, url: string, body?: string, extraHeaders: Record<string, string> = {}) {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#apiKey}`, accept: 'application/json', ...extraHeaders };
    if (body !== undefined) headers['content-type'] = 'application/json';
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      let text: string;
      try {
        response = await this.#fetch(url, { method, headers, body, signal: AbortSignal.timeout(this.#timeoutMs) });
        text = await response.text();
      } catch (err) {
        // No answer (refused, reset, timed out): safe to retry, creates included (same Idempotency-Key).
        if (attempt >= this.#retries) {
          const message = `${method} ${url} got no answer: ${(err as Error).message}`;
          throw new PetstoreError({ status: 0, code: 'network_error', message, cause: err });
        }
        await this.#sleep(this.#backoff(attempt, undefined));
        continue;
      }
      if (response.ok) return { body: text ? parseJson(text) : undefined, headers: response.headers };
      const error = this.#errorOf(response, text);
      const banned = error.code === 'key_banned';
      if (banned || !RETRYABLE.has(response.status) || attempt >= this.#retries) throw error;
      const wait = this.#backoff(attempt, error.retryAfter);
      if (wait > this.#maxDelayMs) throw error; // longer than the caller is willing to wait
      await this.#sleep(wait);
    }
  }

  /** Full jitter over an exponential step, but never sooner than Retry-After. */
  #backoff(attempt: number, retryAfterSeconds: number | undefined): number {
    const step = Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** attempt);
    const jittered = Math.round(this.#random() * step);
    return retryAfterSeconds === undefined ? jittered : retryAfterSeconds * 1000 + jittered;
  }

  #errorOf(response: Response, text: string): PetstoreError {
    let body: Partial<ErrorBody> = {};
    try {
      body = parseJson(text) as ErrorBody;
    } catch {
      // not JSON: described by the status alone
    }
    return new PetstoreError({
      status: response.status,
      code: body.code ?? 'http_error',
      message: body.message ?? `HTTP ${response.status}`,
      requestId: body.requestId ?? response.headers.get('x-request-id') ?? undefined,
      retryAfter: retryAfterSeconds(response.headers.get('retry-after'), Date.now()),
      details: body.details,
    });
  }
}

/** Retry-After as whole seconds: given as seconds, or as an HTTP date (RFC 9110 allows both). */
export function retryAfterSeconds(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - nowMs) / 1000));
}

/** The target of the `rel="next"` link of a Link header (RFC 8288: rel quoted or not, among others). */
export function nextLink(header: string | null): string | undefined {
  for (const match of (header ?? '').matchAll(/<([^>]*)>((?:\s*;\s*[^;,]+)*)/g)) {
    const rel = /;\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,]+))/i.exec(match[2]!);
    if ((rel?.[1] ?? rel?.[2] ?? '').toLowerCase().split(/\s+/).includes('next')) return match[1];
  }
  return undefined;
}
