/**
 * `petstore restore` on SQLite: the database replaced by a backup, once the backup is checked and no
 * process has the database open.
 *
 * The backup is copied beside the database and checked there, so what is checked is what is put in
 * place: PRAGMA integrity_check, and a schema version this release knows (older ones are migrated by
 * the next start, as any database is). Then the old file is locked: an exclusive lock, which SQLite
 * grants only while no other connection has the file open, since a connection in WAL mode keeps a
 * shared lock on it for as long as it is open, idle or not (BEGIN EXCLUSIVE would not do: in WAL mode
 * it takes only the write lock, which an idle server does not hold). Leaving WAL mode under that lock
 * copies the old -wal into the old file and deletes it, so no stale -wal can be read as part of the
 * new file; its -shm is removed too. The checked copy is then renamed over the database, and the lock
 * released. A server that starts meanwhile waits, then opens the new file (open-current.ts).
 *
 * Pet ids are never reused, so the restored file goes on numbering after the highest id the replaced
 * database handed out, when that database could be read.
 */
import { constants, copyFileSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DatabaseSync, isBusy, type Database } from './driver.ts';
import { LATEST_SQLITE_VERSION } from './migrations.ts';
import { fileAt, openCurrent } from './open-current.ts';
import { partialPath, removeStalePartials, removeWithSiblings, renameIntoPlace, SIBLINGS } from './partial-files.ts';
import { schemaVersionOf, summarise, type DatabaseSummary } from './summary.ts';

/** The backup as found: a file of its own, not the database, without a -wal holding commits it lacks. */
function refuseBackup(backup: string, database: string): void {
  const found = statSync(backup, { throwIfNoEntry: false });
  if (!found?.isFile()) throw new Error(`there is no backup file at ${backup}`);
  if (backup === database || fileAt(backup) === fileAt(database)) throw new Error(`${backup} is the database itself`);
  if ((statSync(`${backup}-wal`, { throwIfNoEntry: false })?.size ?? 0) > 0) {
    const why = 'a database in use, or copied with its -wal';
    throw new Error(
      `${backup}-wal beside it may hold commits the file lacks (${why}): back it up with petstore backup and restore that copy`,
    );
  }
}

/** Checks the copy at path, taken from backup, and leaves it in rollback-journal mode; what it holds. */
function check(path: string, backup: string): DatabaseSummary {
  let db: Database | undefined;
  try {
    db = new DatabaseSync(path);
    const problems = (db.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[]).map((row) => row.integrity_check);
    if (problems[0] !== 'ok') throw new Error(problems[0]);
  } catch (err) {
    db?.close();
    throw new Error(`${backup} fails SQLite's integrity check: ${(err as Error).message}`, { cause: err });
  }
  try {
    const version = schemaVersionOf(db, backup);
    if (version > LATEST_SQLITE_VERSION) {
      const newer = `newer than this release's ${LATEST_SQLITE_VERSION}`;
      throw new Error(`${backup} has schema version ${version}, ${newer}: restore it with the release that wrote it`);
    }
    // A copy of a database in WAL mode: the file alone, so that nothing expects a -wal beside it.
    db.exec('PRAGMA journal_mode = DELETE');
    return summarise(db, path);
  } finally {
    db.close();
  }
}

/**
 * The exclusive lock on the database's file, kept until the connection closes: EXCLUSIVE locking mode,
 * out of WAL mode (which checkpoints and deletes the -wal) into a journal kept in memory, so that
 * nothing is left on disk beside the old file, and a transaction that takes the lock.
 */
function lockExclusively(db: Database): void {
  db.exec('PRAGMA locking_mode = EXCLUSIVE');
  db.exec('PRAGMA journal_mode = MEMORY');
  db.exec('BEGIN EXCLUSIVE');
  db.exec('COMMIT');
}

function lockDatabase(database: string): Database {
  try {
    return openCurrent(database, lockExclusively, 0);
  } catch (err) {
    if (isBusy(err)) {
      throw new Error(`a server or another process has ${database} open: stop it, then run petstore restore again`, { cause: err });
    }
    const unread = `${database} cannot be read (${(err as Error).message}), so whether a server has it open cannot be told`;
    throw new Error(`${unread}: stop every server, move it and its -wal and -shm aside, and run petstore restore again`, { cause: err });
  }
}

/** The highest pet id a database handed out (AUTOINCREMENT's sequence), when it records one. */
function lastPetId(db: Database): bigint | undefined {
  try {
    const select = db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'pets'");
    select.setReadBigInts(true);
    return (select.get() as { seq: bigint } | undefined)?.seq;
  } catch {
    return undefined; // no sqlite_sequence: not the service's database, or one that never had a pet
  }
}

/**
 * Pet ids are never reused: ids the replaced database handed out after the backup was taken are not
 * handed out again, as the restored file's sequence is raised to the replaced one's. True when it was.
 */
function continuePetIds(path: string, replacedLast: bigint | undefined): boolean {
  if (replacedLast === undefined) return false;
  const db = new DatabaseSync(path);
  try {
    const own = lastPetId(db);
    if (own !== undefined && own >= replacedLast) return false;
    if (own === undefined) db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('pets', ?)").run(replacedLast);
    else db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'pets'").run(replacedLast);
    return true;
  } finally {
    db.close();
  }
}

export interface RestoreSummary extends DatabaseSummary {
  /** The highest id the replaced database handed out, when the restored file now continues after it. */
  petIdsContinueAfter: bigint | undefined;
}

/** Replaces the database at databasePath with the backup at backupPath; what the restored file holds. */
export function restoreSqlite(backupPath: string, databasePath: string): RestoreSummary {
  const backup = resolve(backupPath);
  const database = resolve(databasePath);
  refuseBackup(backup, database);
  removeStalePartials(dirname(database));
  const partial = partialPath(database);
  let held: Database | undefined;
  try {
    copyFileSync(backup, partial, constants.COPYFILE_EXCL);
    const summary = check(partial, backup);
    if (fileAt(database) !== undefined) held = lockDatabase(database);
    const replacedLast = held && lastPetId(held);
    const continued = continuePetIds(partial, replacedLast);
    // Nothing may be left beside the new file that belonged to the old one.
    for (const suffix of SIBLINGS) rmSync(`${database}${suffix}`, { force: true });
    renameIntoPlace(partial, database);
    return { ...summary, petIdsContinueAfter: continued ? replacedLast : undefined };
  } catch (err) {
    removeWithSiblings(partial);
    throw err;
  } finally {
    held?.close();
  }
}
