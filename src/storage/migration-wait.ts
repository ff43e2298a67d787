/**
 * Waiting for the lock another process holds while it migrates the schema (another instance starting,
 * a `petstore` command, an operator's session), as both engines do it when a store is opened: bounded by
 * MIGRATION_LOCK_WAIT_MS, told once when the wait is more than a moment, and a message naming the lock,
 * the wait and the setting when it ends without the lock.
 */

/** The setting that bounds the wait, named in every line about it. */
export const MIGRATION_WAIT_SETTING = 'MIGRATION_LOCK_WAIT_MS';

/** MIGRATION_LOCK_WAIT_MS's default: a long migration runs a minute or more. */
export const DEFAULT_MIGRATION_WAIT_MS = 300_000;

export interface MigrationWait {
  /** How long opening waits for the lock (MIGRATION_LOCK_WAIT_MS); 0: one try. */
  waitMs: number;
  /** Told once, when the lock has been found held for UNTOLD_WAIT_MS: a line for the log or the terminal. */
  onWait?: (message: string) => void;
}

/**
 * A wait shorter than this is not told: every start takes the lock for a moment, to find the versions
 * applied, and on SQLite every write of another process does.
 */
export const UNTOLD_WAIT_MS = 250;

/** The lock stayed held for the whole wait: the start gives up, with a message an operator can act on. */
export class MigrationLockTimeoutError extends Error {}

/** What an engine knows of the lock, in words: its name (with its key or file) and who holds it. */
export interface HeldLock {
  /** "the migration lock (PostgreSQL advisory lock 7316482105)". */
  lock: string;
  /** "another session (pid 4242, application \"psql\", user postgres)", or as much as the engine can tell. */
  holder: string;
}

/** Seconds, to a tenth, without a trailing ".0": "300 s", "1.5 s". */
const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;

export function waitingMessage({ lock, holder }: HeldLock, waitMs: number): string {
  return `waiting for ${lock}, which ${holder} holds; waiting up to ${seconds(waitMs)} (${MIGRATION_WAIT_SETTING}=${waitMs})`;
}

export function lockTimeout({ lock, holder }: HeldLock, waitedMs: number, waitMs: number): MigrationLockTimeoutError {
  return new MigrationLockTimeoutError(
    `gave up after ${seconds(waitedMs)} waiting for ${lock}, which ${holder} still holds; ${MIGRATION_WAIT_SETTING}=${waitMs} ` +
      `bounds the wait: start again once it is released, or raise ${MIGRATION_WAIT_SETTING}`,
  );
}
