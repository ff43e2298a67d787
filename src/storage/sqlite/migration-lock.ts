/**
 * SQLite's migration lock is the database's write lock, which every write of another process takes for a
 * moment: a start waits for it silently for UNTOLD_WAIT_MS, then says once that it waits and goes on
 * waiting up to MIGRATION_LOCK_WAIT_MS in all (a migration of another start, a write transaction left
 * open at a prompt). SQLite waits itself (busy_timeout), blocking the thread: harmless before a server
 * listens, or in a command. It cannot tell which process holds the lock.
 */
import { lockTimeout, UNTOLD_WAIT_MS, waitingMessage, type MigrationWait } from '../migration-wait.ts';
import { isBusy, type Database } from './driver.ts';

/** BEGIN IMMEDIATE on the database in `file`, waiting for another process's write lock as `wait` says. */
export function beginHoldingWriteLock(db: Database, file: string, wait: MigrationWait): void {
  const started = performance.now();
  const elapsed = () => performance.now() - started;
  const held = { lock: `the write lock of the SQLite file ${file}`, holder: 'another process (SQLite does not tell which)' };
  const tryFor = (ms: number): boolean => {
    db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.ceil(ms))}`);
    try {
      db.exec('BEGIN IMMEDIATE');
      return true;
    } catch (err) {
      if (!isBusy(err)) throw err;
      return false;
    }
  };
  if (tryFor(Math.min(UNTOLD_WAIT_MS, wait.waitMs))) return;
  if (elapsed() < wait.waitMs) {
    wait.onWait?.(waitingMessage(held, wait.waitMs));
    if (tryFor(wait.waitMs - elapsed())) return;
  }
  throw lockTimeout(held, elapsed(), wait.waitMs);
}
