/**
 * The storage contract. Every engine (sqlite/, later postgres/) implements it with the same
 * behaviour, checked by one contract test suite. Methods are async because remote engines are;
 * the embedded engine simply resolves at once.
 */
import type { ApiKey, Environment } from '../domain/api-key.js';
import type { NewPet, Pet, PetStatus } from '../domain/pet.js';
import type { Plan } from '../domain/plans.js';

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
}

export interface KeyStore {
  createKey(key: NewApiKey): Promise<ApiKey>;
  findKeyByHash(hash: string): Promise<ApiKey | undefined>;
  listKeys(): Promise<ApiKey[]>;
  /** True when a key with that id existed and was not already revoked. */
  revokeKey(id: string): Promise<boolean>;
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

export interface Store extends PetStore, KeyStore, BanStore {
  readonly engine: 'sqlite' | 'postgres';
  /** A secret shared by every instance on this database, made once by the first migration. */
  cursorSecret(): Promise<string>;
  /** Resolves when the database answers; used by /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
