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
 * The copy is written beside the target and renamed into place when complete (partial-files.ts).
 */
import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DatabaseSync, isBusy, type Database } from './driver.ts';
import { openCurrent, fileAt } from './open-current.ts';
import { partialPath, removeStalePartials, removeWithSiblings, renameIntoPlace, SIBLINGS } from './partial-files.ts';
import { schemaVersionOf, summarise, type DatabaseSummary } from './summary.ts';

/** A target backup refuses, whatever --force says: the database, its -wal and -shm, a folder, a missing folder. */
function refuseTarget(source: string, target: string, force: boolean): void {
  const own = [source, ...SIBLINGS.map((suffix) => `${source}${suffix}`)];
  if (own.includes(target) || (fileAt(target) !== undefined && fileAt(target) === fileAt(source))) {
    throw new Error(`${target} is the database itself; back it up to another file`);
  }
  const folder = dirname(target);
  if (!statSync(folder, { throwIfNoEntry: false })?.isDirectory()) throw new Error(`${folder} is not an existing folder; create it first`);
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

/** Copies the database at source to target (both resolved here); what the copy holds. */
export function backupSqlite(sourcePath: string, targetPath: string, { force }: { force: boolean }): DatabaseSummary {
  const source = resolve(sourcePath);
  const target = resolve(targetPath);
  if (fileAt(source) === undefined) throw new Error(`there is no SQLite database at ${source} to back up`);
  refuseTarget(source, target, force);
  removeStalePartials(dirname(target));
  const partial = partialPath(target);
  try {
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
      summary = summarise(copy, partial);
    } finally {
      copy.close();
    }
    renameIntoPlace(partial, target);
    return summary;
  } catch (err) {
    removeWithSiblings(partial);
    throw err;
  }
}
