/**
 * Idempotent creates (docs/decisions.md, "Idempotency-Key"), apart from HTTP and any engine. A create is fenced
 * by its claim's token, so one that commits after its claim was taken over makes nothing; a claim is released
 * only when its create certainly stored nothing.
 */
import { hash } from 'node:crypto';
import { DAY_MS, MINUTE_MS, SECOND_MS } from '../domain/durations.ts';
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
  /** The clock, in epoch milliseconds. */
  now: () => number;
  /** Told when purging expired claims fails; the purge runs off the request's path, so nobody else hears of it. */
  onPurgeError: (err: unknown) => void;
  /** Told how many expired claims a purge deleted. */
  onPurged?: (deleted: number) => void;
}

/** The request's meaning, not its bytes: the same pet sent with other spacing or key order is the same request. */
export function requestHash(pet: NewPet): string {
  return hash('sha256', JSON.stringify([pet.name, pet.categoryId.toString(), pet.status]), 'hex');
}

export class IdempotentCreates {
  readonly #store: IdempotencyStore;
  readonly #now: () => number;
  readonly #onPurgeError: (err: unknown) => void;
  readonly #onPurged: (deleted: number) => void;
  #purgedAtMs = 0;

  constructor(options: IdempotentCreatesOptions) {
    this.#store = options.store;
    this.#now = options.now;
    this.#onPurgeError = options.onPurgeError;
    this.#onPurged = options.onPurged ?? (() => undefined);
  }

  async create(scope: IdempotencyScope, pet: NewPet): Promise<IdempotentCreate> {
    const nowMs = this.#now();
    this.#purgeExpired(nowMs);
    const hashed = requestHash(pet);
    const claim = await this.#store.claimIdempotencyKey(scope, hashed, nowMs, IDEMPOTENCY_WINDOW_MS, CLAIM_STALE_MS);
    if (claim.state !== 'claimed') return this.#answer(claim, nowMs);
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
    return this.#answer(current ?? { state: 'in_flight', staleAtMs: 0 }, this.#now()); // gone: a retry claims it afresh
  }

  #answer(claim: FoundIdempotencyClaim, nowMs: number): IdempotentCreate {
    switch (claim.state) {
      case 'done':
        return { outcome: 'replayed', pet: claim.pet };
      case 'mismatch':
        return { outcome: 'mismatch' };
      case 'in_flight':
        // Bounded: a claim written by an instance whose clock is ahead would otherwise ask for longer.
        return { outcome: 'in_flight', retryInMs: Math.min(CLAIM_STALE_MS, Math.max(0, claim.staleAtMs - nowMs)) };
    }
  }

  /** Expired claims go at most once a minute per instance, off the request's path. */
  #purgeExpired(nowMs: number): void {
    if (nowMs - this.#purgedAtMs < PURGE_EVERY_MS) return;
    this.#purgedAtMs = nowMs;
    this.#store.purgeIdempotencyKeys(nowMs - IDEMPOTENCY_WINDOW_MS).then(this.#onPurged, this.#onPurgeError);
  }
}
