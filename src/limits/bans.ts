/**
 * Temporary bans of keys that keep sending after 429 (docs/rate-limits.md). A refusal counts only BAN_GRACE_MS
 * after its window's first refusal, so requests already in flight never do; BAN_THRESHOLD counted in a minute
 * bans the subject (shared by rotations) for BAN_DURATION_SECONDS, to the whole second, as Retry-After says.
 */
import type { BanStore } from '../storage/store.ts';
import { MINUTE_MS } from '../domain/durations.ts';
import { TtlCache } from '../domain/ttl-cache.ts';
import { nearestExhaustion, type LimitDecision, type RateLimiter } from './limiter.ts';

export interface BanPolicy {
  /** Refused requests in one window that earn a ban. */
  threshold: number;
  /** Refusals within this long of a key's first refusal are not counted: they were already in flight. */
  graceMs: number;
  durationMs: number;
  /** How long a ban lookup is reused from memory. */
  cacheTtlMs: number;
}

export class KeyBans {
  /** Each key's ban end (0: none) as last read from the store. */
  readonly #cache: TtlCache<string, number>;
  /** The store read on its way for each key. */
  readonly #reading = new Map<string, Promise<number>>();
  readonly #store: BanStore;
  readonly #limiter: RateLimiter;
  readonly #policy: BanPolicy;

  constructor(store: BanStore, limiter: RateLimiter, policy: BanPolicy) {
    this.#store = store;
    this.#limiter = limiter;
    this.#policy = policy;
    this.#cache = new TtlCache({ ttlMs: policy.cacheTtlMs });
  }

  /** The end of the key's ban, or undefined when it is not banned. */
  async bannedUntil(keyId: string, nowMs: number): Promise<number | undefined> {
    const bannedUntilMs = this.knownBanEnd(keyId, nowMs) ?? (await this.#read(keyId, nowMs));
    return bannedUntilMs > nowMs ? bannedUntilMs : undefined;
  }

  /** The key's ban end (0: none) from the store, one read however many requests ask for it at once. */
  #read(keyId: string, nowMs: number): Promise<number> {
    let reading = this.#reading.get(keyId);
    if (reading === undefined) {
      reading = this.#store
        .banEndOf(keyId, nowMs)
        .then((end) => {
          this.#cache.set(keyId, end ?? 0, nowMs);
          return end ?? 0;
        })
        .finally(() => this.#reading.delete(keyId));
      this.#reading.set(keyId, reading);
    }
    return reading;
  }

  /**
   * The same answer as bannedUntil while the key's ban state is in memory: its ban end (0: none).
   * Undefined when only bannedUntil can tell.
   */
  knownBanEnd(keyId: string, nowMs: number): number | undefined {
    return this.#cache.get(keyId, nowMs);
  }

  /** Counts a refused request; returns the end of the ban it earned, if it earned one. */
  async recordRefusal(keyId: string, refusal: LimitDecision): Promise<number | undefined> {
    const nowMs = refusal.nowMs;
    const refusing = nearestExhaustion(refusal.windows);
    const window = `${refusing.name}:${refusing.resetAtMs}`;
    const firstRefusalMs = await this.#limiter.firstMark(`refusals:${keyId}:${window}`, refusing.resetAtMs);
    if (nowMs - firstRefusalMs < this.#policy.graceMs) return undefined;
    const refusals = await this.#limiter.consume(`refused:${keyId}`, [
      { name: 'refused', limit: this.#policy.threshold, windowMs: MINUTE_MS },
    ]);
    // Only the refusal that reaches the threshold bans: one ban per key and window at most, so a key
    // unbanned by the operator is not banned again by refusals it had already made in this window.
    if (!refusals.allowed || refusals.windows[0]!.remaining > 0) return undefined;
    const bannedUntilMs = Math.ceil((nowMs + this.#policy.durationMs) / 1000) * 1000;
    await this.#store.banKey(keyId, bannedUntilMs);
    this.#cache.set(keyId, bannedUntilMs, nowMs);
    return bannedUntilMs;
  }
}
