/**
 * `petstore backup` on SQLite: a consistent copy of a database that servers go on reading and
 * writing. VACUUM INTO writes what one read transaction sees: in WAL mode a snapshot, which writers
 * never wait for, holding every commit made before it began. It runs on every Node.js line the
 * project supports (node:sqlite's backup() needs 22.16), and the copy is one self-contained file in
 * rollback-journal mode, without free pages, that needs no -wal beside it. (SQLite's online backup
 * copies in steps and starts again whenever another process writes between two of them, so under
 * steady writes it may never finish.) While the snapshot is read, checkpoints cannot pass it, so the
 * WAL grows with the writes made meanwhile and is reused after the next checkpoint.
 *
 * The copy is made no more readable than the database (file-owner.ts), records the environment the
 * database belongs to (environment.ts), and gets its checksum beside it (checksum.ts). It is written
 * beside the target and renamed into place when complete (partial-files.ts), after its checksum
 * file, so that a file at the target always has its checksum beside it.
 */
import { closeSync, fchmodSync, openSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Environment } from '../../domain/api-key.ts';
import { checksumPath, sha256Of, writeChecksum } from './checksum.ts';
import { DatabaseSync, isBusy, type Database } from './driver.ts';
import { environmentOf, recordEnvironment } from './environment.ts';
import { fileAt, followLinks, sameFile } from './file-identity.ts';
import { copyMode, groupOf, ownershipOf } from './file-owner.ts';
import { openCurrent } from './open-current.ts';
import { partialPath, removeStalePartials, removeWithSiblings, renameIntoPlace, SIBLINGS } from './partial-files.ts';
import { schemaVersionOf, summarise, type DatabaseSummary } from './summary.ts';

/** A target backup refuses, whatever --force says: the database, its -wal and -shm, a folder, a missing folder. */
function refuseTarget(source: string, target: string, force: boolean): void {
  const folder = dirname(target);
  if (!statSync(folder, { throwIfNoEntry: false })?.isDirectory()) throw new Error(`${folder} is not an existing folder; create it first`);
  const own = [source, ...SIBLINGS.map((suffix) => `${source}${suffix}`)];
  const followed = followLinks(target);
  if (own.some((file) => file === followed || sameFile(file, target))) {
    throw new Error(`${target} is the database itself; back it up to another file`);
  }
  const existing = statSync(target, { throwIfNoEntry: false });
  if (existing?.isDirectory()) throw new Error(`${target} is a folder; name a file in it`);
  if (existing && !force) throw new Error(`${target} exists; add --force to replace it`);
}

/** The database in WAL mode, on the file the path names now (open-current.ts), as servers open it. */
function openSource(source: string): Database {
  try {
    return openCurrent(source, (db) => db.exec('PRAGMA journal_mode = WAL'), 5000);
  } catch (err) {
    // Locked past 5 s: a restore holds it, or a process switches a file not yet in WAL mode.
    if (isBusy(err)) throw new Error(`another process holds ${source} locked (a restore?); try again once it is done`, { cause: err });
    throw new Error(`${source} cannot be read as a SQLite database: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * An empty file at path that VACUUM INTO writes into (it accepts an empty file), keeping its mode:
 * so the copy is no more readable than the database from its first byte. Its mode, for the checksum.
 */
function createPrivately(path: string, database: string): number {
  const fd = openSync(path, 'wx', 0o600);
  try {
    const mode = copyMode(ownershipOf(database)!, groupOf(fd));
    fchmodSync(fd, mode);
    return mode;
  } finally {
    closeSync(fd);
  }
}

export interface BackupSummary extends DatabaseSummary {
  /** Where its checksum is (checksum.ts). */
  checksumFile: string;
}

/**
 * Copies the database at sourcePath to targetPath (both resolved here); what the copy holds. The copy
 * records the environment the database belongs to, or `environment` (PETSTORE_ENV) when it tells none.
 */
export function backupSqlite(
  sourcePath: string,
  targetPath: string,
  { force, environment }: { force: boolean; environment: Environment },
): BackupSummary {
  if (fileAt(sourcePath) === undefined) throw new Error(`there is no SQLite database at ${resolve(sourcePath)} to back up`);
  const source = followLinks(sourcePath);
  const target = resolve(targetPath);
  refuseTarget(source, target, force);
  removeStalePartials(dirname(target));
  const partial = partialPath(target);
  try {
    const mode = createPrivately(partial, source);
    const db = openSource(source);
    try {
      schemaVersionOf(db, source); // refuses a file that is not the service's
      db.prepare('VACUUM INTO ?').run(partial);
    } finally {
      db.close();
    }
    const copy = new DatabaseSync(partial);
    let summary: DatabaseSummary;
    try {
      recordEnvironment(copy, environmentOf(copy).environment ?? environment);
      summary = summarise(copy, partial);
    } finally {
      copy.close();
    }
    writeChecksum(target, sha256Of(partial), mode);
    renameIntoPlace(partial, target);
    return { ...summary, checksumFile: checksumPath(target) };
  } catch (err) {
    removeWithSiblings(partial);
    throw err;
  }
}
