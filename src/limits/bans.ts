/**
 * Temporary bans of keys that keep sending after 429 (docs/rate-limits.md). A refusal counts only BAN_GRACE_MS
 * after its window's first refusal, so requests already in flight never do; BAN_THRESHOLD counted in a minute
 * bans the subject (shared by rotations) for BAN_DURATION_SECONDS, to the whole second, as Retry-After says:
 * that much real time on the instance that placed it, whatever its wall clock does meanwhile. A stored end
 * more than one ban length from a reader's now is not believed (a clock that was ahead set it): it is
 * read as ending one ban length after it was first read, so it ends within twice its length.
 */
import type { BanStore } from '../storage/store.ts';
import type { Clock } from '../domain/clock.ts';
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
  /** Keys whose bans are kept in memory at once (CACHE_ENTRIES unless said: a worker's share). */
  cacheEntries?: number;
}

/** A ban as this instance knows it: its end as stored (Unix time, 0: none) and when it ends in real time. */
interface KnownBan {
  storedEndMs: number;
  /** By the elapsed clock. */
  endsAtElapsedMs: number;
  /** Placed here while the store could not take it: held on this instance alone, until it ends. */
  unstored?: true;
}

/** A ban earned while the store could not take it: the request is still refused (429), and the ban held here. */
export class BanNotStoredError extends Error {
  readonly bannedUntilMs: number;
  constructor(bannedUntilMs: number, cause: unknown) {
    super('the ban could not be stored', { cause });
    this.bannedUntilMs = bannedUntilMs;
  }
}

export class KeyBans {
  /** Each key's ban as last read from the store, reused for cacheTtlMs. */
  readonly #cache: TtlCache<string, KnownBan>;
  /**
   * The latest ban of each key this instance has read or placed, ended ones too: a ban read again with
   * the same stored end keeps the real end it was first given, so a wall clock stepped either way neither
   * lengthens, lifts nor restarts it. One entry per banned key; an unban's empty read removes it.
   */
  readonly #lasting = new Map<string, KnownBan>();
  /** The store read on its way for each key. */
  readonly #reading = new Map<string, Promise<KnownBan>>();
  readonly #store: BanStore;
  readonly #limiter: RateLimiter;
  readonly #clock: Clock;
  readonly #policy: BanPolicy;

  constructor(store: BanStore, limiter: RateLimiter, clock: Clock, policy: BanPolicy) {
    this.#store = store;
    this.#limiter = limiter;
    this.#clock = clock;
    this.#policy = policy;
    this.#cache = new TtlCache({ ttlMs: policy.cacheTtlMs, maxEntries: policy.cacheEntries });
  }

  /** The end of the key's ban by the limiter's clock at nowMs, or undefined when it is not banned. */
  async bannedUntil(keyId: string, nowMs: number): Promise<number | undefined> {
    const ban = this.#cache.get(keyId, this.#clock.elapsed()) ?? (await this.#read(keyId, nowMs));
    const end = this.#endBy(ban, nowMs);
    return end > nowMs ? end : undefined;
  }

  /**
   * The same answer as bannedUntil while the key's ban state is in memory: its ban end (0: none).
   * Undefined when only bannedUntil can tell.
   */
  knownBanEnd(keyId: string, nowMs: number): number | undefined {
    const ban = this.#cache.get(keyId, this.#clock.elapsed());
    return ban && this.#endBy(ban, nowMs);
  }

  /** A ban's end as the caller's clock reads it at nowMs: what is left of it in real time, from nowMs. */
  #endBy(ban: KnownBan, nowMs: number): number {
    if (ban.storedEndMs === 0) return 0;
    const left = ban.endsAtElapsedMs - this.#clock.elapsed();
    return left > 0 ? nowMs + left : 0;
  }

  /** The key's ban from the store, one read however many requests ask for it at once. */
  #read(keyId: string, nowMs: number): Promise<KnownBan> {
    let reading = this.#reading.get(keyId);
    if (reading === undefined) {
      // Every stored end, past ones too: a ban this instance holds is judged by its real end, not by
      // the wall clock (one that was stepped forward would lift it); an unban removes the row.
      reading = this.#store
        .banEndOf(keyId, 0)
        .then((end) => this.#know(keyId, end ?? 0, nowMs))
        .finally(() => this.#reading.delete(keyId));
      this.#reading.set(keyId, reading);
    }
    return reading;
  }

  /** Remembers a ban read (or, `placed`, placed here) at nowMs by the limiter's clock. */
  #know(keyId: string, storedEndMs: number, nowMs: number, placed = false): KnownBan {
    const elapsedMs = this.#clock.elapsed();
    const lasting = this.#lasting.get(keyId);
    const inForce = lasting !== undefined && lasting.endsAtElapsedMs > elapsedMs;
    let ban: KnownBan;
    if (!placed && lasting !== undefined && (lasting.storedEndMs === storedEndMs || (lasting.unstored && inForce))) ban = lasting;
    else {
      // A stored end more than one ban length from now was set by a clock ahead (or this one is behind).
      const believedEndMs = placed ? storedEndMs : Math.min(storedEndMs, nowMs + this.#policy.durationMs);
      ban = { storedEndMs, endsAtElapsedMs: elapsedMs + believedEndMs - nowMs };
    }
    if (ban.storedEndMs !== 0) this.#lasting.set(keyId, ban);
    else this.#lasting.delete(keyId);
    this.#cache.set(keyId, ban, elapsedMs);
    return ban;
  }

  /** Counts a refused request; returns the end of the ban it earned, if it earned one. */
  async recordRefusal(keyId: string, refusal: LimitDecision): Promise<number | undefined> {
    const nowMs = refusal.nowMs;
    const refusing = nearestExhaustion(refusal.windows);
    const window = `${refusing.name}:${refusing.resetAtMs}`;
    const firstRefusalMs = await this.#limiter.firstMark(`refusals:${keyId}:${window}`, refusing.resetAtMs);
    // Without a grace every refusal counts: the first's mark, read a moment after its decision, is later than nowMs.
    if (this.#policy.graceMs > 0 && nowMs - firstRefusalMs < this.#policy.graceMs) return undefined;
    const refusals = await this.#limiter.consume(`refused:${keyId}`, [
      { name: 'refused', limit: this.#policy.threshold, windowMs: MINUTE_MS },
    ]);
    // Only the refusal that reaches the threshold bans: one ban per key and window at most, so a key
    // unbanned by the operator is not banned again by refusals it had already made in this window.
    if (!refusals.allowed || refusals.windows[0]!.remaining > 0) return undefined;
    const bannedUntilMs = Math.ceil((nowMs + this.#policy.durationMs) / 1000) * 1000;
    try {
      await this.#store.banKey(keyId, bannedUntilMs);
    } catch (err) {
      this.#lasting.set(keyId, { ...this.#know(keyId, bannedUntilMs, nowMs, true), unstored: true });
      throw new BanNotStoredError(bannedUntilMs, err);
    }
    this.#know(keyId, bannedUntilMs, nowMs, true);
    return bannedUntilMs;
  }
}
