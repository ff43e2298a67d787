/**
 * The storage contract. Every engine (sqlite/, postgres/) implements it with the same
 * behaviour, checked by one contract test suite. Methods are async because remote engines are;
 * the embedded engine simply resolves at once.
 */
import type { ApiKey, Environment } from '../domain/api-key.ts';
import type { NewPet, Pet, PetStatus } from '../domain/pet.ts';
import type { Plan } from '../domain/plans.ts';

export interface ListPetsQuery {
  status: PetStatus | undefined;
  /** Keyset position: only ids strictly greater than this. */
  afterId: bigint | undefined;
  limit: number;
}

export interface NewApiKey {
  id: string;
  hash: string;
  prefix: string;
  environment: Environment;
  plan: Plan;
  perMinute: number;
  perDay: number;
  label: string | null;
  /** ApiKey.subjectId: for a rotation's replacement, that of the key it replaces; null for a key of its own. */
  subjectId: string | null;
  /** Whether the key carries a tag (domain/key-tags.ts): every key issued since tags does; one written before them does not. */
  tagged: boolean;
}

export interface PetStore {
  /**
   * True when a list page that already has a next page can never change: ids are committed in
   * increasing order and pets are never updated or deleted. SQLite serialises its writers, so it
   * holds there; PostgreSQL sequences hand out ids before commit and transactions may commit out of
   * order, so a gap can still fill in there.
   */
  readonly fullPagesAreFinal: boolean;
  /** Commits before resolving: a resolved pet is durable. */
  createPet(pet: NewPet): Promise<Pet>;
  getPet(id: bigint): Promise<Pet | undefined>;
  /** Pets in ascending id order. */
  listPets(query: ListPetsQuery): Promise<Pet[]>;
  /**
   * The same page as listPets, written as JSON by the database: an optimisation of petsJson
   * (domain/pet-json.ts), whose bytes it must equal (the contract suite checks both engines). Turning
   * rows into objects with BigInt ids and back into JSON cost more than the query itself.
   */
  listPetsJson(query: ListPetsQuery): Promise<PetPageJson>;
}

export interface PetPageJson {
  /** petsJson of the page's pets: the JSON array of at most `limit` pets. */
  json: string;
  /** The id of the last pet in the page, when the page is full. */
  lastId: bigint | undefined;
  /** Whether pets exist after this page. */
  more: boolean;
}

/** What a request with an Idempotency-Key finds when it claims that key. */
export type IdempotencyClaim =
  /** The key is this request's: `token` fences its create (see createPetIdempotently). */
  | { state: 'claimed'; token: string }
  /** Another request with the same payload holds the key; it may be taken over from `staleAtMs` (epoch ms). */
  | { state: 'in_flight'; staleAtMs: number }
  | { state: 'mismatch' }
  /** An earlier request with the same payload created this pet. */
  | { state: 'done'; pet: Pet };

/** What a request that only looks finds: anything but a claim of its own. */
export type FoundIdempotencyClaim = Exclude<IdempotencyClaim, { state: 'claimed' }>;

export interface IdempotencyScope {
  /**
   * The API key's subject id: idempotency keys are scoped to the caller, which a rotated key and the
   * key that replaced it both are (they share quota and bans too).
   */
  keyId: string;
  idempotencyKey: string;
}

/**
 * Idempotent creates (the IETF Idempotency-Key draft), in domain terms: a claim is a durable row shared
 * by every instance; the first request for a key and caller claims it, and the create records the new
 * pet's id on the claim in the same transaction as the pet, so a retry after any failure either finds
 * the pet or is free to create. Each claim carries a token of its own (a fencing token): a create
 * makes its pet only while the claim still has that token and no pet, so a create that commits late,
 * after its claim was taken over, makes nothing. Pets never change, so the pet found is the pet first
 * created.
 */
export interface IdempotencyStore {
  /**
   * Claims the key for a request whose payload hashes to requestHash, stamped nowMs. Claims made at or
   * before expiredAtMs are forgotten; an unfinished claim older than staleAfterMs at nowMs is taken over,
   * with a new token.
   */
  claimIdempotencyKey(
    scope: IdempotencyScope,
    requestHash: string,
    nowMs: number,
    expiredAtMs: number,
    staleAfterMs: number,
  ): Promise<IdempotencyClaim>;
  /**
   * What the key's claim holds now, without claiming or taking over (an unfinished claim is in flight
   * however old); undefined when there is none.
   */
  findIdempotencyKey(scope: IdempotencyScope, requestHash: string, staleAfterMs: number): Promise<FoundIdempotencyClaim | undefined>;
  /**
   * Creates the pet and records its id on the claim, in one transaction, if the claim still has this
   * token and no pet; otherwise creates nothing and resolves undefined. A rejection with
   * CreateOutcomeUnknownError (storage/errors.ts) may still have committed; any other left nothing.
   */
  createPetIdempotently(scope: IdempotencyScope, token: string, pet: NewPet): Promise<Pet | undefined>;
  /** Drops the claim if it still has this token and no pet: its request failed with nothing stored, and a retry may create. */
  releaseIdempotencyKey(scope: IdempotencyScope, token: string): Promise<void>;
  /** Deletes every claim made at or before beforeMs (expired ones), so the table does not grow without end. */
  purgeIdempotencyKeys(beforeMs: number): Promise<number>;
}

export interface KeyStore {
  createKey(key: NewApiKey): Promise<ApiKey>;
  findKeyByHash(hash: string): Promise<ApiKey | undefined>;
  /**
   * The hashes of the environment's keys without a tag (issued before tags, or by a release that knew none)
   * that are not revoked: what an instance reads once at start, to look those keys up whoever sends them.
   */
  untaggedKeyHashes(environment: Environment): Promise<string[]>;
  /** Whether the environment has a key that authenticates at nowMs (neither revoked nor expired): the start line's advice. */
  hasUsableKey(environment: Environment, nowMs: number): Promise<boolean>;
  listKeys(): Promise<ApiKey[]>;
  /** True when a key with that id existed and was not already revoked. */
  revokeKey(id: string): Promise<boolean>;
  /** Changes a key's plan and limits, or its expiry (epoch ms; null: never); undefined when no such key. */
  updateKey(id: string, changes: KeyChanges): Promise<ApiKey | undefined>;
}

export interface KeyChanges {
  plan?: Plan;
  perMinute?: number;
  perDay?: number;
  expiresAtMs?: number | null;
}

export interface Ban {
  keyId: string;
  bannedUntil: Date;
}

export interface BanStore {
  /** Bans a key until a moment; a later ban of the same key replaces an earlier one. */
  banKey(keyId: string, untilMs: number): Promise<void>;
  /** The moment a key's ban ends, if it has one ending after nowMs. */
  banEndOf(keyId: string, nowMs: number): Promise<number | undefined>;
  listBans(nowMs: number): Promise<Ban[]>;
  /** Removes the key's ban; true when it had one still in force at nowMs. */
  liftBan(keyId: string, nowMs: number): Promise<boolean>;
}

export interface Store extends PetStore, KeyStore, BanStore, IdempotencyStore {
  readonly engine: 'sqlite' | 'postgres';
  /**
   * A secret shared by every instance on this database, made once by the first migration. It signs page
   * cursors and, through a key derived from it, the tags of API keys (domain/key-tags.ts): it travels with
   * the keys in every backup, and changing it would refuse every tagged key.
   */
  cursorSecret(): Promise<string>;
  /** Resolves when the database answers; used by /readyz and, at each scrape, the petstore_ready gauge. */
  ping(): Promise<void>;
  /** Connection pool figures, on engines that keep a pool. */
  poolStats?(): { total: number; idle: number; waiting: number };
  close(): Promise<void>;
}
