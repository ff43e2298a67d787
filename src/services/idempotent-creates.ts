/**
 * Idempotent pet creates (the IETF Idempotency-Key draft), as the service's own rules, apart from HTTP
 * and from any engine: a create with a key claims it, creates, and records the pet on the claim; a
 * repeat of the same request within the window finds that pet again; the same key with another
 * request, or while the first is still creating, is refused. The route turns the outcome into an
 * answer; the store keeps claims durable and shared by every instance.
 */
import { hash } from 'node:crypto';
import { DAY_MS, MINUTE_MS } from '../domain/durations.ts';
import type { NewPet, Pet } from '../domain/pet.ts';
import type { IdempotencyScope, IdempotencyStore } from '../storage/store.ts';

/** How long the first create is found again for the same key. */
export const IDEMPOTENCY_WINDOW_MS = DAY_MS;
/** An unfinished claim older than this belongs to a request that died; a retry may take it over. */
export const CLAIM_STALE_MS = MINUTE_MS;
/** How often expired claims are deleted, by whichever create comes along first. */
export const PURGE_EVERY_MS = MINUTE_MS;

export type IdempotentCreate =
  /** This request created the pet. */
  | { outcome: 'created'; pet: Pet }
  /** An earlier request with the same key and payload created it. */
  | { outcome: 'replayed'; pet: Pet }
  /** An earlier request with the same key is still creating; retry shortly. */
  | { outcome: 'in_flight' }
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
    const claim = await this.#store.claimIdempotencyKey(scope, requestHash(pet), nowMs, IDEMPOTENCY_WINDOW_MS, CLAIM_STALE_MS);
    if (claim.state === 'in_flight' || claim.state === 'mismatch') return { outcome: claim.state };
    if (claim.state === 'done') return { outcome: 'replayed', pet: claim.pet };
    try {
      return { outcome: 'created', pet: await this.#store.createPetIdempotently(scope, pet) };
    } catch (err) {
      await this.#store.releaseIdempotencyKey(scope).catch(() => undefined); // unreachable storage: the claim goes stale
      throw err;
    }
  }

  /** Expired claims go at most once a minute per instance, off the request's path. */
  #purgeExpired(nowMs: number): void {
    if (nowMs - this.#purgedAtMs < PURGE_EVERY_MS) return;
    this.#purgedAtMs = nowMs;
    this.#store.purgeIdempotencyKeys(nowMs - IDEMPOTENCY_WINDOW_MS).then(this.#onPurged, this.#onPurgeError);
  }
}
