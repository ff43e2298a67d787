/**
 * Creates on PostgreSQL grouped: one multi-row statement per turn of the event loop, each create resolving after
 * the commit (docs/decisions.md, "Creates share a commit"). Rows are matched by create token; a batch that fails
 * while the database is reachable is retried one create at a time, so one bad row fails only its own.
 */
import type { NewPet } from '../../domain/pet.ts';
import { StorageUnavailableError } from '../errors.ts';
import type { PetRow } from '../rows.ts';
import type { Query } from './query.ts';

interface Pending {
  pet: NewPet;
  token: string;
  resolve: (row: PetRow) => void;
  reject: (error: unknown) => void;
}

/** Each column as one array parameter: one statement text (and one prepared plan) for any batch size. */
const INSERT_BATCH = `
  INSERT INTO pets (name, category_id, status, create_token)
  SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[])
  RETURNING id, name, category_id, status, create_token`;

export class GroupInsert {
  #queue: Pending[] = [];
  readonly #query: Query;
  readonly #failure: (err: StorageUnavailableError) => unknown;

  constructor(query: Query, failure: (err: StorageUnavailableError) => unknown) {
    this.#query = query;
    this.#failure = failure;
  }

  /** Inserts the pet with its create token; resolves with its row once committed. */
  add(pet: NewPet, token: string): Promise<PetRow> {
    return new Promise((resolve, reject) => {
      if (this.#queue.push({ pet, token, resolve, reject }) === 1) setImmediate(() => void this.#flush());
    });
  }

  async #flush(): Promise<void> {
    const batch = this.#queue;
    this.#queue = [];
    try {
      const rows = await this.#insert(batch);
      const byToken = new Map(rows.map((row) => [row.create_token, row]));
      for (const p of batch) p.resolve(byToken.get(p.token)!);
    } catch (err) {
      if (err instanceof StorageUnavailableError) {
        const failure = this.#failure(err);
        for (const p of batch) p.reject(failure);
      } else if (batch.length === 1) {
        batch[0]!.reject(err);
      } else {
        await Promise.all(batch.map((p) => this.#insertAlone(p)));
      }
    }
  }

  async #insertAlone(p: Pending): Promise<void> {
    try {
      p.resolve((await this.#insert([p]))[0]!);
    } catch (err) {
      p.reject(err instanceof StorageUnavailableError ? this.#failure(err) : err);
    }
  }

  #insert(batch: readonly Pending[]): Promise<(PetRow & { create_token: string })[]> {
    return this.#query<PetRow & { create_token: string }>(
      INSERT_BATCH,
      [
        batch.map((p) => p.pet.name),
        batch.map((p) => p.pet.categoryId.toString()),
        batch.map((p) => p.pet.status),
        batch.map((p) => p.token),
      ],
      'create-pets',
    );
  }
}
