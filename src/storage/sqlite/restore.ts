/**
 * `petstore restore` on SQLite: the database replaced by a backup, once the backup is checked and no
 * process has the database open.
 *
 * The backup is copied beside the database and checked there, so what is checked is what is put in
 * place: its SHA-256 against the checksum file beside the backup (checksum.ts; SQLite's own check
 * does not see changed bytes inside a row), PRAGMA integrity_check, and a schema version this release
 * knows (older ones are migrated as any database is: by the next start, or by petstore migrate). Then the path is locked: an
 * exclusive lock on the database file, which SQLite grants only while no other connection has the
 * file open, since a connection in WAL mode keeps a shared lock on it for as long as it is open, idle
 * or not (BEGIN EXCLUSIVE would not do: in WAL mode it takes only the write lock, which an idle
 * server does not hold). Where there is no database yet, taking the lock makes an empty one, so that
 * a server or a command that opens the path meanwhile waits for the lock too, and never writes a
 * database of its own (and its -wal) where the backup is about to go. Leaving WAL mode under that
 * lock copies the old -wal into the old file and deletes it, so no stale -wal can be read as part of
 * the new file; its -shm is removed too. The checked copy, given the old file's mode and owner
 * (file-owner.ts), is then renamed over the database, and the lock released. A process that opened
 * the path meanwhile then opens the new file (open-current.ts).
 *
 * A path that is a symbolic link is followed: the file it points to is replaced, the link stays.
 * A backup of another environment than the database's is refused unless the operator names both
 * (environment.ts). Pet ids are never reused, so the restored file goes on numbering after the
 * highest id the replaced database handed out, when that database could be read.
 */
import { rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Environment } from '../../domain/api-key.ts';
import { checksumPath, copyHashing, readChecksum } from './checksum.ts';
import { DatabaseSync, isBusy, type Database } from './driver.ts';
import { environmentOf, recordEnvironment, type DatabaseEnvironment } from './environment.ts';
import { fileAt, followLinks, sameFile } from './file-identity.ts';
import { giveOwnership, newDatabaseOwnership, ownershipOf } from './file-owner.ts';
import { LATEST_SQLITE_VERSION } from './migrations.ts';
import { openCurrent } from './open-current.ts';
import { partialPath, removeStalePartials, removeWithSiblings, renameIntoPlace, SIBLINGS } from './partial-files.ts';
import { schemaVersionOf, summarise, type DatabaseSummary } from './summary.ts';

/** The backup as found: a file of its own, not the database, without a -wal holding commits it lacks. */
function refuseBackup(backup: string, database: string): void {
  const found = statSync(backup, { throwIfNoEntry: false });
  if (!found?.isFile()) throw new Error(`there is no backup file at ${backup}`);
  if (backup === database || sameFile(backup, database)) throw new Error(`${backup} is the database itself`);
  if ((statSync(`${backup}-wal`, { throwIfNoEntry: false })?.size ?? 0) > 0) {
    const why = 'a database in use, or copied with its -wal';
    throw new Error(
      `${backup}-wal beside it may hold commits the file lacks (${why}): back it up with petstore backup and restore that copy`,
    );
  }
}

/** The digest the backup's checksum file records; refused when there is none, unless restoring without it was asked for. */
function expectedChecksum(backup: string, withoutChecksum: boolean): string | undefined {
  const digest = readChecksum(backup);
  if (digest === undefined && !withoutChecksum) {
    throw new Error(
      `${backup} has no checksum beside it (${checksumPath(backup)}), so a change to its bytes cannot be seen: ` +
        'copy that file with it, or add --without-checksum to restore it unchecked',
    );
  }
  return digest;
}

/** Refuses a copy whose bytes are not those the backup's checksum file records. */
function refuseChanged(backup: string, digest: string, expected: string): void {
  if (digest !== expected) {
    const sums = `SHA-256 ${digest}, not the ${expected} that ${checksumPath(backup)} records`;
    throw new Error(`${backup} changed after it was written (${sums}): restore another backup`);
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

/** The database at path, locked (an empty one made there when there was none). */
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

/** True when the locked file holds no table: the empty database the lock made, or an empty file. */
function holdsNothing(db: Database): boolean {
  return (db.prepare('SELECT count(*) AS n FROM sqlite_schema').get() as { n: number }).n === 0;
}

type KnownEnvironment = DatabaseEnvironment & { environment: Environment };

/** The environment of the database being replaced, or PETSTORE_ENV's when it tells none (or there is none). */
function databaseEnvironment(held: Database | undefined, existed: boolean, configured: Environment): KnownEnvironment {
  if (existed && held !== undefined) {
    try {
      const { environment, basis } = environmentOf(held);
      if (environment !== undefined) return { environment, basis };
    } catch {
      // not the service's database (no settings or api_keys table): it tells nothing
    }
  }
  const why = existed ? 'it tells none itself' : 'there was no database';
  return { environment: configured, basis: `PETSTORE_ENV, as ${why}` };
}

/**
 * databaseEnvironment of the database at path, read without writing to it, locking it or leaving a -wal or
 * -shm beside it (SQLite's `immutable`, which reads the file alone: what a WAL not yet checkpointed holds
 * is checked again under the lock); one that cannot be read tells none.
 */
function peekEnvironment(path: string, configured: Environment): KnownEnvironment {
  let db: Database | undefined;
  try {
    db = new DatabaseSync(`${pathToFileURL(path).href}?immutable=1`, { readOnly: true });
  } catch {
    return databaseEnvironment(undefined, true, configured);
  }
  try {
    return databaseEnvironment(db, true, configured);
  } finally {
    db.close();
  }
}

/** FROM:TO, the environments a restore across them is asked for by name (--across-environments). */
export type Across = `${Environment}:${Environment}`;

/**
 * Refuses a backup of one environment over a database of the other, unless `across` names both, in
 * that order; and an `across` that does not describe this restore, as its author expected another.
 */
function refuseAcross(
  backup: string,
  database: string,
  from: DatabaseEnvironment,
  into: KnownEnvironment,
  across: Across | undefined,
): void {
  const crossing = from.environment !== undefined && from.environment !== into.environment;
  const asked = `${from.environment}:${into.environment}`;
  const of = `${backup} is a backup of ${from.environment ?? 'no known environment'} (${from.basis})`;
  const what = `${of}; the database at ${database} is ${into.environment} (${into.basis})`;
  if (crossing && across !== asked) {
    const wrong = across === undefined ? '' : `, not ${across}`;
    const refusal = `${into.environment} servers accept none of its ${from.environment} keys`;
    throw new Error(`${what}: ${refusal}. To restore it anyway, add --across-environments ${asked}${wrong}`);
  }
  if (!crossing && across !== undefined)
    throw new Error(`${what}: --across-environments ${across} does not describe this restore; run it without`);
}

/**
 * Prepares the checked copy at path to replace a database: pet ids are never reused, so ids the
 * replaced database handed out after the backup was taken are not handed out again (the sequence is
 * raised to the replaced one's), and it records the environment it now belongs to. True when the
 * sequence was raised.
 */
function finishCopy(path: string, replacedLast: bigint | undefined, environment: Environment): boolean {
  const db = new DatabaseSync(path);
  try {
    recordEnvironment(db, environment);
    if (replacedLast === undefined) return false;
    const own = lastPetId(db);
    if (own !== undefined && own >= replacedLast) return false;
    if (own === undefined) db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('pets', ?)").run(replacedLast);
    else db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'pets'").run(replacedLast);
    return true;
  } finally {
    db.close();
  }
}

export interface RestoreOptions {
  /** PETSTORE_ENV: the environment of a database that tells none, or of the path where there is none. */
  environment: Environment;
  /** The restore across environments the operator asked for by name. */
  across?: Across;
  /** Restore a backup that has no checksum file beside it. */
  withoutChecksum?: boolean;
}

export interface RestoreSummary extends DatabaseSummary {
  /** The file replaced: the path given, its links followed. */
  database: string;
  /** The environment the restored database belongs to now (recorded in it). */
  restoredInto: Environment;
  /** The highest id the replaced database handed out, when the restored file now continues after it. */
  petIdsContinueAfter: bigint | undefined;
  /** False when it was restored without a checksum to check (--without-checksum, and none was there). */
  checksumChecked: boolean;
}

/** Replaces the database at databasePath with the backup at backupPath; what the restored file holds. */
export function restoreSqlite(backupPath: string, databasePath: string, options: RestoreOptions): RestoreSummary {
  const backup = resolve(backupPath);
  const database = followLinks(databasePath);
  refuseBackup(backup, database);
  const expected = expectedChecksum(backup, options.withoutChecksum === true);
  removeStalePartials(dirname(database));
  const partial = partialPath(database);
  const existed = fileAt(database) !== undefined;
  let held: Database | undefined;
  let madeEmpty: string | undefined; // the file the lock made, while it is at the path
  try {
    const digest = copyHashing(backup, partial);
    if (expected !== undefined) refuseChanged(backup, digest, expected);
    const summary = check(partial, backup);
    // Every refusal comes before the lock, which takes the database out of WAL mode (rewriting its
    // header): a refused restore leaves its bytes as they were.
    const seen = existed ? peekEnvironment(database, options.environment) : databaseEnvironment(undefined, false, options.environment);
    refuseAcross(backup, database, summary.environment, seen, options.across);
    const owner = (made: boolean) => (made ? newDatabaseOwnership(dirname(database)) : ownershipOf(database)!);
    giveOwnership(partial, owner(!existed), `the database at ${database}`);
    held = lockDatabase(database);
    // Made by the lock (a file another process made meanwhile and closed again is that process's).
    if (!existed && holdsNothing(held)) madeEmpty = fileAt(database);
    // What the lock holds, in case another process changed the path between the look and the lock.
    const into = databaseEnvironment(held, madeEmpty === undefined, options.environment);
    if (into.environment !== seen.environment || existed !== (madeEmpty === undefined)) {
      refuseAcross(backup, database, summary.environment, into, options.across);
      giveOwnership(partial, owner(madeEmpty !== undefined), `the database at ${database}`);
    }
    const replacedLast = lastPetId(held);
    const continued = finishCopy(partial, replacedLast, into.environment);
    // Nothing may be left beside the new file that belonged to the old one.
    for (const suffix of SIBLINGS) rmSync(`${database}${suffix}`, { force: true });
    renameIntoPlace(partial, database);
    return {
      ...summary,
      database,
      restoredInto: into.environment,
      petIdsContinueAfter: continued ? replacedLast : undefined,
      checksumChecked: expected !== undefined,
    };
  } catch (err) {
    removeWithSiblings(partial);
    // The empty database the lock made goes too, while still locked: the path is left as it was.
    if (madeEmpty !== undefined && fileAt(database) === madeEmpty) rmSync(database, { force: true });
    throw err;
  } finally {
    held?.close();
  }
}
