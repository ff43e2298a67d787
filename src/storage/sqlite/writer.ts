/**
 * Every write once the store is open, one at a time, each BEGIN IMMEDIATE ... COMMIT. With busy_timeout 0 a held
 * lock fails BEGIN at once and it is retried from a timer, so the event loop never sleeps in SQLite; a write still
 * waiting at SQLITE_LOCK_WAIT_MS, or meeting a storage fault, is rolled back with StorageUnavailableError.
 */
import { StorageUnavailableError } from '../errors.ts';
import { exact, type Database, type Statement } from './driver.ts';
import { faultReason, isLockReason, retryAfterSeconds } from './faults.ts';
import type { WriteHealth } from './write-health.ts';

/** Retries for a held lock start this soon and back off to the longest; each is one cheap try. */
const FIRST_RETRY_MS = 2;
const LONGEST_RETRY_MS = 50;

interface Pending {
  work: () => unknown;
  /** By the monotonic clock (performance.now): a wall clock stepped meanwhile neither cuts nor stretches the wait. */
  deadline: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

export class SqliteWriter {
  readonly lockWaitMs: number;
  readonly #db: Database;
  readonly #begin: Statement;
  readonly #commit: Statement;
  readonly #health: WriteHealth;
  #queue: Pending[] = [];
  #retry: NodeJS.Timeout | undefined;
  #retryMs = FIRST_RETRY_MS;
  #pumping = false;
  #closed = false;
  /** A ROLLBACK that failed leaves a transaction open; it is ended before the next BEGIN. */
  #mustRollback = false;

  constructor(db: Database, lockWaitMs: number, health: WriteHealth) {
    this.#db = db;
    // exact: run() reports the connection's latest pet id, which may be above 2^53 (driver.ts).
    this.#begin = exact(db.prepare('BEGIN IMMEDIATE'));
    this.#commit = exact(db.prepare('COMMIT'));
    this.lockWaitMs = lockWaitMs;
    this.#health = health;
  }

  /** Runs work in a write transaction once the lock is ours; resolves after COMMIT. */
  write<T>(work: () => T, deadline = performance.now() + this.lockWaitMs): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.#closed) return reject(new Error('The database is closed'));
      this.#queue.push({ work, deadline, resolve: resolve as (value: unknown) => void, reject });
      if (this.#retry === undefined && !this.#pumping) this.#pump();
    });
  }

  /**
   * For readiness: resolves while the latest write succeeded; after a failure, tries one write now
   * (work, which must touch the database file) and resolves if it commits. Nothing waits for a lock.
   */
  async probe(work: () => unknown): Promise<void> {
    const failing = this.#health.failing;
    if (failing === undefined) return;
    if (this.#queue.length > 0) throw this.#unavailable(undefined, failing);
    await this.write(work, 0);
  }

  /** Tries once more what is queued, without waiting for a lock, and refuses later writes. Before the database closes. */
  close(): void {
    clearTimeout(this.#retry);
    this.#retry = undefined;
    for (const p of this.#queue) p.deadline = 0;
    this.#pump();
    this.#closed = true;
  }

  #pump(): void {
    this.#retry = undefined;
    this.#pumping = true;
    try {
      while (this.#queue.length > 0) {
        const refused = this.#tryBegin();
        if (refused !== undefined && isLockReason(faultReason(refused))) {
          this.#refuseOverdue(refused);
          if (this.#queue.length > 0) this.#retry = setTimeout(() => this.#pump(), this.#backOff());
          return;
        }
        const head = this.#queue.shift()!;
        if (refused !== undefined) {
          head.reject(this.#failure(refused));
          continue;
        }
        this.#retryMs = FIRST_RETRY_MS;
        this.#run(head);
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** BEGIN IMMEDIATE; what refused it, if anything. */
  #tryBegin(): unknown {
    if (this.#mustRollback) this.#rollback();
    try {
      this.#begin.run();
      return undefined;
    } catch (err) {
      return err;
    }
  }

  #run(p: Pending): void {
    let result: unknown;
    try {
      result = p.work();
      this.#commit.run();
    } catch (err) {
      this.#rollback();
      p.reject(this.#failure(err));
      return;
    }
    this.#health.succeeded();
    p.resolve(result);
  }

  #rollback(): void {
    try {
      this.#db.exec('ROLLBACK');
      this.#mustRollback = false;
    } catch (err) {
      // SQLite ends the transaction itself on some faults (a full disk): then nothing is left to undo.
      this.#mustRollback = !/no transaction is active/.test((err as Error).message);
    }
  }

  /** Writes whose deadline passed while the lock was held are answered; the rest keep waiting. */
  #refuseOverdue(busy: unknown): void {
    const now = performance.now();
    const overdue = this.#queue.filter((p) => p.deadline <= now);
    if (overdue.length === 0) return;
    this.#queue = this.#queue.filter((p) => p.deadline > now);
    const error = this.#failure(busy);
    for (const p of overdue) p.reject(error);
  }

  #backOff(): number {
    const delay = this.#retryMs;
    this.#retryMs = Math.min(LONGEST_RETRY_MS, this.#retryMs * 2);
    return delay;
  }

  /** A storage fault as StorageUnavailableError, recorded in the write health; anything else as it is. */
  #failure(err: unknown): unknown {
    const reason = faultReason(err);
    if (reason === undefined) return err;
    this.#health.failed(reason);
    return this.#unavailable(err, reason);
  }

  #unavailable(cause: unknown, reason: string): StorageUnavailableError {
    return new StorageUnavailableError(cause, { reason, retryAfterSeconds: retryAfterSeconds(reason), logged: this.#health.logs });
  }
}
