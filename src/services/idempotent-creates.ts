/**
 * Idempotent creates (docs/decisions.md, "Idempotency-Key"), apart from HTTP and any engine. A create is fenced
 * by its claim's token, so one that commits after its claim was taken over makes nothing; a claim is released
 * only when its create certainly stored nothing.
 */
import { hash } from 'node:crypto';
import { BoundedWallClock, type Clock } from '../domain/clock.ts';
import { DAY_MS, MINUTE_MS, SECOND_MS } from '../domain/durations.ts';
import { TtlCache } from '../domain/ttl-cache.ts';
import type { NewPet, Pet } from '../domain/pet.ts';
import { CreateOutcomeUnknownError } from '../storage/errors.ts';
import type { FoundIdempotencyClaim, IdempotencyScope, IdempotencyStore } from '../storage/store.ts';

/** How long the first create is found again for the same key. */
export const IDEMPOTENCY_WINDOW_MS = DAY_MS;
/**
 * An unfinished claim older than this may be taken over by a retry. The fence makes a take-over safe at
 * any age; this only spares a create still running on the instance that claimed it, which on
 * PostgreSQL gives up within 4 s (2 s waiting for a pooled connection, 2 s for the statement).
 */
export const CLAIM_STALE_MS = 5 * SECOND_MS;
/** How often expired claims are deleted, by whichever create comes along first. */
export const PURGE_EVERY_MS = MINUTE_MS;

export type IdempotentCreate =
  /** This request created the pet. */
  | { outcome: 'created'; pet: Pet }
  /** An earlier request with the same key and payload created it. */
  | { outcome: 'replayed'; pet: Pet }
  /**
   * An earlier request with the same key is still creating, or its outcome is not known yet; within
   * `retryInMs` (at most CLAIM_STALE_MS) a retry finds its pet or may take the key over.
   */
  | { outcome: 'in_flight'; retryInMs: number }
  /** The key was used with another payload; nothing was created. */
  | { outcome: 'mismatch' };

export interface IdempotentCreatesOptions {
  store: IdempotencyStore;
  clock: Clock;
  /** Told when purging expired claims fails; the purge runs off the request's path, so nobody else hears of it. */
  onPurgeError: (err: unknown) => void;
  /** Told how many expired claims a purge deleted. */
  onPurged?: (deleted: number) => void;
}

/** The request's meaning, not its bytes: the same pet sent with other spacing or key order is the same request. */
export function requestHash(pet: NewPet): string {
  return hash('sha256', JSON.stringify([pet.name, pet.categoryId.toString(), pet.status]), 'hex');
}

/** A claim found unfinished and stamped later than this instance's clock: when it was first seen, in real time. */
interface ClaimAhead {
  createdAtMs: number;
  seenAtElapsedMs: number;
}

export class IdempotentCreates {
  readonly #store: IdempotencyStore;
  readonly #clock: Clock;
  /**
   * Claims are stamped with its latest reading and forgotten by its earliest, so a wall clock stepped
   * forward and back neither purges a claim early nor stamps one as older than it is.
   */
  readonly #wall: BoundedWallClock;
  /**
   * Unfinished claims stamped ahead of this clock (by a clock ahead, or before this one was stepped
   * back), by scope: such a claim may be taken over once CLAIM_STALE_MS of real time has passed since
   * it was first seen here, not only once the wall clock reaches its stamp.
   */
  readonly #ahead = new TtlCache<string, ClaimAhead>({ ttlMs: IDEMPOTENCY_WINDOW_MS });
  readonly #onPurgeError: (err: unknown) => void;
  readonly #onPurged: (deleted: number) => void;
  #purgedAtElapsedMs = -Infinity;

  constructor(options: IdempotentCreatesOptions) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#wall = new BoundedWallClock(options.clock);
    this.#onPurgeError = options.onPurgeError;
    this.#onPurged = options.onPurged ?? (() => undefined);
  }

  async create(scope: IdempotencyScope, pet: NewPet): Promise<IdempotentCreate> {
    const nowMs = this.#wall.latest();
    const expiredAtMs = this.#wall.earliest() - IDEMPOTENCY_WINDOW_MS;
    this.#purgeExpired(expiredAtMs);
    const hashed = requestHash(pet);
    const ahead = this.#aheadOf(scope);
    // A claim first seen ahead a while ago is stale now if no newer one replaced it.
    const staleAfterMs = ahead && this.#elapsedSince(ahead) >= CLAIM_STALE_MS ? nowMs - ahead.createdAtMs : CLAIM_STALE_MS;
    const claim = await this.#store.claimIdempotencyKey(scope, hashed, nowMs, expiredAtMs, staleAfterMs);
    if (claim.state !== 'claimed') return this.#answer(scope, claim, nowMs);
    let created: Pet | undefined;
    try {
      created = await this.#store.createPetIdempotently(scope, claim.token, pet);
    } catch (err) {
      // Released only when nothing was stored; otherwise the claim stays until it may be taken over.
      // A release that fails leaves it the same way.
      if (!(err instanceof CreateOutcomeUnknownError)) await this.#store.releaseIdempotencyKey(scope, claim.token).catch(() => undefined);
      throw err;
    }
    if (created) return { outcome: 'created', pet: created };
    // The fence held: another request took the key over (this one was slow) and created nothing here.
    // What the key holds now is the answer; it was never ours again, so nothing is claimed.
    const current = await this.#store.findIdempotencyKey(scope, hashed, CLAIM_STALE_MS);
    return this.#answer(scope, current ?? { state: 'in_flight', staleAtMs: 0 }, this.#wall.latest()); // gone: a retry claims it afresh
  }

  #answer(scope: IdempotencyScope, claim: FoundIdempotencyClaim, nowMs: number): IdempotentCreate {
    switch (claim.state) {
      case 'done':
        return { outcome: 'replayed', pet: claim.pet };
      case 'mismatch':
        return { outcome: 'mismatch' };
      case 'in_flight': {
        const createdAtMs = claim.staleAtMs - CLAIM_STALE_MS;
        if (createdAtMs <= nowMs) return { outcome: 'in_flight', retryInMs: Math.max(0, claim.staleAtMs - nowMs) };
        let ahead = this.#aheadOf(scope);
        if (ahead?.createdAtMs !== createdAtMs) {
          ahead = { createdAtMs, seenAtElapsedMs: this.#clock.elapsed() };
          this.#ahead.set(aheadKey(scope), ahead, ahead.seenAtElapsedMs);
        }
        return { outcome: 'in_flight', retryInMs: Math.max(0, CLAIM_STALE_MS - this.#elapsedSince(ahead)) };
      }
    }
  }

  #aheadOf(scope: IdempotencyScope): ClaimAhead | undefined {
    return this.#ahead.get(aheadKey(scope), this.#clock.elapsed());
  }

  #elapsedSince(ahead: ClaimAhead): number {
    return this.#clock.elapsed() - ahead.seenAtElapsedMs;
  }

  /** Expired claims go at most once a minute per instance, off the request's path. */
  #purgeExpired(expiredAtMs: number): void {
    const elapsedMs = this.#clock.elapsed();
    if (elapsedMs - this.#purgedAtElapsedMs < PURGE_EVERY_MS) return;
    this.#purgedAtElapsedMs = elapsedMs;
    this.#store.purgeIdempotencyKeys(expiredAtMs).then(this.#onPurged, this.#onPurgeError);
  }
}

const aheadKey = (scope: IdempotencyScope) => `${scope.keyId}\n${scope.idempotencyKey}`;
