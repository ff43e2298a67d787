/**
 * Creates on PostgreSQL, grouped: creates that arrive during one turn of the event loop are inserted
 * by one multi-row statement on the next turn, and every caller's promise resolves only once that
 * statement has committed, so a 201 still means the pet is stored. One statement for a batch instead
 * of one per pet saves each create most of the client's cost of a round trip (building, writing and
 * parsing a statement), which is most of what a create costs the instance (docs/decisions.md).
 *
 * Rows are matched to callers by each row's one-time create token, never by position. If the batch
 * fails for a reason other than the database being unreachable (a constraint, say), nothing of it was
 * stored and each create is tried alone, so one failing row cannot fail the others. If the database
 * is unreachable every caller gets the failure as `failure` gives it (pets.ts): once the statement
 * may have been sent, the whole batch's outcome is unknown, and whatever PostgreSQL committed stays.
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
