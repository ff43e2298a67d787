import { StorageUnavailableError } from '../errors.ts';

/**
 * SQLite failures that say the storage cannot take writes now, not that a statement is wrong: they are
 * answered 503 and end by themselves (a lock released, space freed, a file system made writable again).
 */

/** SQLite's primary result codes of such failures (the low byte of any extended code), named for the log. */
const REASONS = new Map<number, string>([
  [5, 'the database is locked by another process'], // SQLITE_BUSY
  [6, 'the database is locked by another process'], // SQLITE_LOCKED
  [8, 'read-only storage'], // SQLITE_READONLY*
  [10, 'I/O error'], // SQLITE_IOERR* (a file system remounted read-only answers writes with EROFS: SQLITE_IOERR_WRITE)
  [13, 'disk full'], // SQLITE_FULL
  [14, 'the database files cannot be opened'], // SQLITE_CANTOPEN
]);

const BUSY = REASONS.get(5)!;

/** Why storage cannot take writes, when err is such a failure; undefined for anything else. */
export function faultReason(err: unknown): string | undefined {
  const code = (err as { errcode?: unknown } | null)?.errcode;
  return typeof code === 'number' ? REASONS.get(code & 0xff) : undefined;
}

export function isLockReason(reason: string | undefined): boolean {
  return reason === BUSY;
}

/** A held lock is usually gone within seconds; space or a writable file system wait for an operator. */
export function retryAfterSeconds(reason: string): number {
  return isLockReason(reason) ? 2 : 5;
}

/**
 * Every method of a store part, with a storage fault that a read meets (a lock held through recovery,
 * an I/O error) rejected as StorageUnavailableError, a 503, like a write's. Other failures stay as they are.
 */
export function withFaultsUnavailable<T extends object>(part: T): T {
  const unavailable = (err: unknown) => {
    const reason = faultReason(err);
    throw reason === undefined || err instanceof StorageUnavailableError
      ? err
      : new StorageUnavailableError(err, { reason, retryAfterSeconds: retryAfterSeconds(reason) });
  };
  const wrapped: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(part)) {
    wrapped[name] =
      typeof value === 'function'
        ? (...args: unknown[]) => (value as (...a: unknown[]) => Promise<unknown>)(...args).catch(unavailable)
        : value;
  }
  return wrapped as T;
}
