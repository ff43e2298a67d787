/**
 * Group commit for pet creation on SQLite. Creates that arrive during one turn of the event loop are
 * inserted in a single transaction on the next turn, and every caller's promise resolves only after
 * that transaction has committed, so a 201 still means the pet is stored. One commit per batch
 * instead of one per pet is what makes concurrent POSTs cheap: each commit appends the touched pages
 * to the WAL (and, with synchronous=FULL, fsyncs it).
 *
 * If the batch's transaction fails, nothing of it was stored; each create is then retried alone,
 * so one failing insert cannot fail the others.
 */
import { inWriteTransaction, type Database } from './driver.ts';
import type { NewPet, Pet } from '../../domain/pet.ts';

interface Pending {
  pet: NewPet;
  resolve: (pet: Pet) => void;
  reject: (error: unknown) => void;
}

export class GroupCommit {
  #queue: Pending[] = [];
  #closed = false;
  readonly #db: Database;
  readonly #insertOne: (pet: NewPet) => Pet;

  constructor(db: Database, insertOne: (pet: NewPet) => Pet) {
    this.#db = db;
    this.#insertOne = insertOne;
  }

  add(pet: NewPet): Promise<Pet> {
    return new Promise((resolve, reject) => {
      if (this.#queue.push({ pet, resolve, reject }) === 1) setImmediate(() => this.#flush());
    });
  }

  /** Commits what is queued, so no accepted create is dropped; later creates are refused. Before the database closes. */
  close(): void {
    this.#flush();
    this.#closed = true;
  }

  /** Commits what is queued now. */
  #flush(): void {
    const batch = this.#queue;
    if (batch.length === 0) return;
    this.#queue = [];
    if (this.#closed) {
      for (const p of batch) p.reject(new Error('The database is closed'));
      return;
    }
    let created: Pet[];
    try {
      created =
        batch.length === 1
          ? [this.#insertOne(batch[0]!.pet)]
          : inWriteTransaction(this.#db, () => batch.map((p) => this.#insertOne(p.pet)));
    } catch (error) {
      if (batch.length === 1) return batch[0]!.reject(error);
      for (const p of batch) {
        try {
          p.resolve(this.#insertOne(p.pet));
        } catch (alone) {
          p.reject(alone);
        }
      }
      return;
    }
    batch.forEach((p, i) => p.resolve(created[i]!));
  }
}
