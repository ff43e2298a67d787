/**
 * Bearer API keys, looked up by the SHA-256 of the whole key: nothing secret is compared in our code. Found
 * and unknown keys are remembered for KEY_CACHE_TTL_MS, which bounds how late a revocation is seen; a key is
 * stored before it is shown, so a new one works at once. Concurrent lookups of one key share one query. A
 * key whose tag does not pass (domain/key-tags.ts) is refused without one.
 */
import type { FastifyRequest } from 'fastify';
import { environmentOfKey, formatOfKey, hashKey, type ApiKey, type Environment } from '../../domain/api-key.ts';
import { BoundedWallClock, type Clock } from '../../domain/clock.ts';
import { HOUR_MS } from '../../domain/durations.ts';
import type { HashPrefixSet } from '../../domain/hash-prefix-set.ts';
import type { KeyTags } from '../../domain/key-tags.ts';
import { TtlCache } from '../../domain/ttl-cache.ts';
import type { KeyStore } from '../../storage/store.ts';
import { ApiError } from '../contract/api-error.ts';

/** A refused key that exists (revoked, expired) is named by `keyId`, so the log shows who still sends it. */
export type AuthResult = { key: ApiKey } | { key: undefined; failure: ApiError; keyId?: string };

const BEARER = /^Bearer +([A-Za-z0-9_-]{1,200}) *$/i;
const CHALLENGE = { 'WWW-Authenticate': 'Bearer realm="petstore"' };

function unauthorized(message: string, keyId?: string): AuthResult {
  return { key: undefined, failure: new ApiError('unauthorized', message, { headers: CHALLENGE }), keyId };
}

export interface KeyAuthenticatorOptions {
  environment: Environment;
  /** How long a found key, or a key found not to exist, is remembered (KEY_CACHE_TTL_MS). */
  cacheTtlMs: number;
  /** Keys each of its caches holds at once (CACHE_ENTRIES unless said: a worker's share). */
  cacheEntries?: number;
  /**
   * Keys' expiries are instants of its wall clock, never followed back (BoundedWallClock.latest); the
   * caches' lifetimes are measured on its elapsed clock.
   */
  clock: Clock;
  /** Checks the tags of keys issued since tags, with the database's secret. */
  tags: KeyTags;
  /**
   * The hashes of the keys issued before tags that could authenticate when the instance started
   * (Store.untaggedKeyHashes): such a key is worth a lookup whoever sends it, as a tagged one is.
   */
  untagged: HashPrefixSet;
  /** Told of every store lookup, for the metric. */
  onLookup?: () => void;
}

export class KeyAuthenticator {
  readonly #keys: KeyStore;
  readonly #environment: Environment;
  readonly #cache: TtlCache<string, ApiKey>;
  /** Kept apart from #cache, so a flood of random keys that fills it never evicts a valid key. */
  readonly #unknown: TtlCache<string, true>;
  /**
   * The hashes of untagged keys found in the store within the last hour (those made after this instance
   * started are not in #untagged). Not to authenticate (revocations are seen through #cache), only to tell
   * a key that exists from a made-up one before a lookup; a tagged key's tag tells that by itself.
   */
  readonly #found: TtlCache<string, true>;
  /** The lookup on its way for each key, which every request presenting that key waits for. */
  readonly #inFlight = new Map<string, Promise<ApiKey | undefined>>();
  readonly #clock: Clock;
  /** Expiries are judged by its latest reading: a clock stepped back does not keep a retired key working. */
  readonly #wall: BoundedWallClock;
  readonly #tags: KeyTags;
  readonly #untagged: HashPrefixSet;
  readonly #onLookup: () => void;

  constructor(keys: KeyStore, options: KeyAuthenticatorOptions) {
    this.#keys = keys;
    this.#environment = options.environment;
    this.#tags = options.tags;
    this.#untagged = options.untagged;
    this.#cache = new TtlCache({ ttlMs: options.cacheTtlMs, maxEntries: options.cacheEntries });
    this.#unknown = new TtlCache({ ttlMs: options.cacheTtlMs, maxEntries: options.cacheEntries });
    this.#found = new TtlCache({ ttlMs: HOUR_MS, maxEntries: options.cacheEntries });
    this.#clock = options.clock;
    this.#wall = new BoundedWallClock(options.clock);
    this.#onLookup = options.onLookup ?? (() => undefined);
  }

  async authenticate(request: FastifyRequest): Promise<AuthResult> {
    const token = this.#token(request);
    return typeof token === 'string' ? this.#check(await this.#lookup(token)) : token;
  }

  /**
   * The same answer as authenticate, when it needs no store lookup: no key, a malformed one, a key
   * remembered as found or as unknown, or one whose tag does not pass. Undefined when only authenticate
   * can tell. A remembered key is answered before its tag is looked at, so it costs no HMAC.
   */
  authenticateNow(request: FastifyRequest): AuthResult | undefined {
    const token = this.#token(request);
    if (typeof token !== 'string') return token;
    const now = this.#clock.elapsed();
    const key = this.#cache.get(token, now);
    if (key) return this.#check(key);
    return this.#unknown.get(token, now) || this.#forged(token) ? this.#check(undefined) : undefined;
  }

  /**
   * Whether authenticate would start a store lookup that only the address's room may allow: of a key
   * issued before tags that is neither remembered, nor on its way, nor known to exist (found in the last
   * hour, or among those this instance started with). A tagged key never needs room: one whose tag does
   * not pass is refused without a lookup, and only the database's secret makes one that passes.
   */
  lookupNeedsRoom(request: FastifyRequest): boolean {
    const token = this.#token(request);
    if (typeof token !== 'string' || formatOfKey(token, this.#environment) !== 'untagged' || this.#inFlight.has(token)) return false;
    const now = this.#clock.elapsed();
    if (this.#cache.get(token, now) !== undefined || this.#unknown.get(token, now) !== undefined) return false;
    const hash = hashKey(token);
    return this.#found.get(hash, now) === undefined && !this.#untagged.has(hash);
  }

  /** Whether the key carries a tag, and that tag is not the one the database's secret makes. */
  #forged(token: string): boolean {
    return formatOfKey(token, this.#environment) === 'tagged' && !this.#tags.verify(token);
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
    if (formatOfKey(token, claimed) === undefined) return unauthorized('Invalid API key');
    return token;
  }

  #check(key: ApiKey | undefined): AuthResult {
    if (key === undefined || key.environment !== this.#environment) return unauthorized('Invalid API key');
    if (key.revokedAt !== null) return unauthorized('This API key has been revoked', key.id);
    // Checked against the clock on every request, so an expiry takes effect at its moment even
    // while the key sits in the cache; a clock stepped forward ends it early, never late.
    if (key.expiresAt !== null && key.expiresAt.getTime() <= this.#wall.latest()) {
      return unauthorized(`This API key expired at ${key.expiresAt.toISOString()}`, key.id);
    }
    return { key };
  }

  /**
   * The caches are keyed by the presented key itself, so a cached request costs no hashing; they live
   * only in this process's memory, like the request that carried it.
   */
  #lookup(token: string): Promise<ApiKey | undefined> {
    const now = this.#clock.elapsed();
    const cached = this.#cache.get(token, now);
    if (cached) return Promise.resolve(cached);
    if (this.#unknown.get(token, now)) return Promise.resolve(undefined);
    let pending = this.#inFlight.get(token);
    if (pending === undefined) {
      if (this.#forged(token)) return Promise.resolve(undefined);
      pending = this.#find(token, now).finally(() => this.#inFlight.delete(token));
      this.#inFlight.set(token, pending);
    }
    return pending;
  }

  /** One store lookup; remembered from the moment it started, so a revocation is seen within the TTL. */
  async #find(token: string, startedMs: number): Promise<ApiKey | undefined> {
    this.#onLookup();
    const hash = hashKey(token);
    const key = await this.#keys.findKeyByHash(hash);
    if (key === undefined) {
      this.#unknown.set(token, true, startedMs);
    } else {
      this.#cache.set(token, key, startedMs);
      if (formatOfKey(token, this.#environment) === 'untagged') this.#found.set(hash, true, startedMs);
    }
    return key;
  }
}
