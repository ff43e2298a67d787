/**
 * The SQLite driver: Node's own node:sqlite, so no native addon (docs/platform.md). Loaded only when SQLite is
 * chosen; on Node.js 22.12 it needs --experimental-sqlite, which every way the project starts node passes.
 */
import type * as NodeSqlite from 'node:sqlite';

export type Database = NodeSqlite.DatabaseSync;
export type Statement = NodeSqlite.StatementSync;

function load(): typeof NodeSqlite {
  // Node.js 22 and 24 label node:sqlite experimental and print a warning when it is first loaded (26
  // does not). It tells an operator nothing to act on and would break the JSON log stream, so this one
  // warning is dropped; every other warning goes through.
  const emitWarning = process.emitWarning;
  process.emitWarning = function (this: NodeJS.Process, warning: string | Error, ...rest: unknown[]) {
    if (String(warning).startsWith('SQLite is an experimental feature')) return;
    return (emitWarning as (...args: unknown[]) => void).call(this, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    const sqlite = process.getBuiltinModule('node:sqlite') as typeof NodeSqlite | undefined;
    if (sqlite === undefined) {
      throw new Error(
        `SQLite needs Node.js 22.13 or newer, or node's --experimental-sqlite flag on 22.12 (this is Node.js ${process.version})`,
      );
    }
    return sqlite;
  } finally {
    process.emitWarning = emitWarning;
  }
}

export const { DatabaseSync } = load();

/** SQLITE_BUSY, with any extended code (SQLITE_BUSY_RECOVERY, ...): another connection holds a lock. */
export function isBusy(err: unknown): boolean {
  const code = (err as { errcode?: unknown }).errcode;
  return typeof code === 'number' && (code & 0xff) === 5;
}

/**
 * Runs work inside BEGIN IMMEDIATE ... COMMIT: the write lock is taken first (waiting up to
 * busy_timeout, or as `begin` waits for it), so the transaction never has to upgrade a read to a write,
 * which SQLite refuses at once when another process wrote in between. A throw rolls everything back.
 */
export function inWriteTransaction<T>(db: Database, work: () => T, begin = () => db.exec('BEGIN IMMEDIATE')): T {
  begin();
  try {
    const result = work();
    db.exec('COMMIT');
    return result;
  } catch (err) {
    // SQLite may have ended the transaction itself (on some I/O errors); then there is nothing to undo.
    try {
      db.exec('ROLLBACK');
    } catch {
      // no transaction was active
    }
    throw err;
  }
}

/**
 * Integers as bigint, for pet columns (elsewhere values are small, and node:sqlite throws rather than round).
 * That includes the lastInsertRowid every run() reports: on a connection that creates pets it is a pet id.
 */
export function exact(statement: Statement): Statement {
  statement.setReadBigInts(true);
  return statement;
}
