/**
 * Bearer API keys. A key is looked up by the SHA-256 of the whole key on an indexed column, so an
 * unknown key and a wrong key cost the same and nothing secret is compared byte by byte in our code.
 * Found keys are cached for a short time (KEY_CACHE_TTL_MS, at most 5 s), which bounds how late a
 * revocation takes effect on every instance. Unknown keys are not cached, so a key created a moment
 * ago works at once.
 */
import type { FastifyRequest } from 'fastify';
import { environmentOfKey, hashKey, type ApiKey, type Environment } from '../domain/api-key.ts';
import { TtlCache } from '../domain/ttl-cache.ts';
import type { KeyStore } from '../storage/store.ts';
import { ApiError } from './api-error.ts';

/** A refused key that exists (revoked, expired) is named by `keyId`, so the log shows who still sends it. */
export type AuthResult = { key: ApiKey } | { key: undefined; failure: ApiError; keyId?: string };

const BEARER = /^Bearer +([A-Za-z0-9_-]{1,200}) *$/i;
const CHALLENGE = { 'WWW-Authenticate': 'Bearer realm="petstore"' };

function unauthorized(message: string, keyId?: string): AuthResult {
  return { key: undefined, failure: new ApiError('unauthorized', message, { headers: CHALLENGE }), keyId };
}

export class KeyAuthenticator {
  readonly #keys: KeyStore;
  readonly #environment: Environment;
  readonly #cache: TtlCache<string, ApiKey>;
  readonly #now: () => number;

  constructor(keys: KeyStore, environment: Environment, cacheTtlMs: number, now: () => number) {
    this.#keys = keys;
    this.#environment = environment;
    this.#cache = new TtlCache({ ttlMs: cacheTtlMs });
    this.#now = now;
  }

  async authenticate(request: FastifyRequest): Promise<AuthResult> {
    const token = this.#token(request);
    return typeof token === 'string' ? this.#check(await this.#lookup(token)) : token;
  }

  /**
   * The same answer as authenticate, when it needs no store lookup: no key, a malformed one, or a key
   * in the cache. Undefined when only authenticate can tell.
   */
  authenticateNow(request: FastifyRequest): AuthResult | undefined {
    const token = this.#token(request);
    if (typeof token !== 'string') return token;
    const key = this.#cache.get(token, this.#now());
    return key && this.#check(key);
  }

  /** The key the request presents, or the refusal when it presents none this server could accept. */
  #token(request: FastifyRequest): string | AuthResult {
    const header = request.headers.authorization;
    if (header === undefined) return unauthorized('Missing API key: send Authorization: Bearer <key>');
    const token = BEARER.exec(header)?.[1];
    if (token === undefined) return unauthorized('Malformed Authorization header: expected Bearer <key>');
    const claimed = environmentOfKey(token);
    if (claimed === undefined) return unauthorized('Invalid API key');
    if (claimed !== this.#environment) {
      return unauthorized(`This API key belongs to the ${claimed} environment; this server is ${this.#environment}`);
    }
    return token;
  }

  #check(key: ApiKey | undefined): AuthResult {
    if (key === undefined || key.environment !== this.#environment) return unauthorized('Invalid API key');
    if (key.revokedAt !== null) return unauthorized('This API key has been revoked', key.id);
    // Checked against the clock on every request, so an expiry takes effect at its moment even
    // while the key sits in the cache.
    if (key.expiresAt !== null && key.expiresAt.getTime() <= this.#now()) {
      return unauthorized(`This API key expired at ${key.expiresAt.toISOString()}`, key.id);
    }
    return { key };
  }

  /**
   * The cache is keyed by the presented key itself, so a cached request costs no hashing; it lives
   * only in this process's memory, like the request that carried it.
   */
  async #lookup(token: string): Promise<ApiKey | undefined> {
    const now = this.#now();
    const cached = this.#cache.get(token, now);
    if (cached) return cached;
    const key = await this.#keys.findKeyByHash(hashKey(token));
    if (key === undefined) {
      this.#cache.delete(token);
      return undefined;
    }
    this.#cache.set(token, key, now);
    return key;
  }
}
