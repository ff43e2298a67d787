/**
 * Group commit on SQLite: creates of one turn of the event loop share one transaction, each resolving after the
 * commit (docs/decisions.md, "Creates share a commit"); a savepoint per pet, so a failing insert fails only its
 * create. While another process holds the lock, new creates join the waiting batch, each bounded by its own wait.
 */
import type { NewPet, Pet } from '../../domain/pet.ts';
import { StorageUnavailableError } from '../errors.ts';
import { faultReason, isLockReason } from './faults.ts';
import { exact, type Database, type Statement } from './driver.ts';
import type { SqliteWriter } from './writer.ts';

interface Pending {
  pet: NewPet;
  /** By the monotonic clock (performance.now): a wall clock stepped meanwhile neither cuts nor stretches the wait. */
  deadline: number;
  resolve: (pet: Pet) => void;
  reject: (error: unknown) => void;
}

type Outcome = { pet: Pet } | { error: unknown };

export class GroupCommit {
  /** Creates not yet taken into a transaction. */
  #queue: Pending[] = [];
  /** The next batch's turn, while it is only scheduled. */
  #turn: NodeJS.Immediate | undefined;
  /** Whether a batch is in the writer's hands (waiting for the lock or being written). */
  #writing = false;
  #closed = false;
  readonly #savepoint: Statement;
  readonly #release: Statement;
  readonly #rollbackTo: Statement;
  readonly #writer: SqliteWriter;
  readonly #insertOne: (pet: NewPet) => Pet;

  constructor(db: Database, writer: SqliteWriter, insertOne: (pet: NewPet) => Pet) {
    // Prepared once: parsed for every insert, they showed in the cost of a batched create.
    this.#savepoint = exact(db.prepare('SAVEPOINT pet'));
    this.#release = exact(db.prepare('RELEASE pet'));
    this.#rollbackTo = exact(db.prepare('ROLLBACK TO pet'));
    this.#writer = writer;
    this.#insertOne = insertOne;
  }

  add(pet: NewPet): Promise<Pet> {
    return new Promise((resolve, reject) => {
      if (this.#closed) return reject(new Error('The database is closed'));
      this.#queue.push({ pet, deadline: performance.now() + this.#writer.lockWaitMs, resolve, reject });
      this.#schedule();
    });
  }

  /** Commits what is queued (or refuses it if the lock cannot be had now); later creates are refused. Before the writer closes. */
  close(): void {
    this.#closed = true;
    clearImmediate(this.#turn);
    this.#turn = undefined;
    if (!this.#writing) this.#write();
  }

  #schedule(): void {
    if (this.#turn === undefined && !this.#writing && this.#queue.length > 0) this.#turn = setImmediate(() => this.#write());
  }

  #write(): void {
    this.#turn = undefined;
    if (this.#queue.length === 0) return;
    this.#writing = true;
    let batch: Pending[] | undefined;
    this.#writer
      .write(() => {
        batch = this.#queue;
        this.#queue = [];
        return batch.map((p) => this.#insertAlone(p.pet));
      }, this.#queue[0]!.deadline)
      .then(
        (outcomes) => outcomes.forEach((o, i) => ('pet' in o ? batch![i]!.resolve(o.pet) : batch![i]!.reject(o.error))),
        (error: unknown) => {
          if (batch !== undefined) return batch.forEach((p) => p.reject(error));
          // The lock never came: only the creates that waited their whole bound are refused. Any other
          // failure to begin (a file that cannot be opened, an I/O error) refuses them all at once.
          const now = performance.now();
          const lockHeld = error instanceof StorageUnavailableError && isLockReason(error.reason);
          const keep = (p: Pending) => lockHeld && !this.#closed && p.deadline > now;
          for (const p of this.#queue) if (!keep(p)) p.reject(error);
          this.#queue = this.#queue.filter(keep);
        },
      )
      .finally(() => {
        this.#writing = false;
        if (this.#closed) this.#queue.splice(0).forEach((p) => p.reject(new Error('The database is closed')));
        this.#schedule();
      });
  }

  #insertAlone(pet: NewPet): Outcome {
    this.#savepoint.run();
    try {
      const created = this.#insertOne(pet);
      this.#release.run();
      return { pet: created };
    } catch (error) {
      if (faultReason(error) !== undefined) throw error;
      this.#rollbackTo.run();
      this.#release.run();
      return { error };
    }
  }
}
