/**
 * The embedded engine: SQLite in-process through Node.js's node:sqlite (driver.ts), in WAL mode.
 *
 * Durability: every write is committed before its promise resolves (creates that arrive in the same
 * turn of the event loop share one transaction; see group-commit.ts). In WAL mode
 * with synchronous=NORMAL a commit reaches the operating system before we answer, so it survives a
 * kill -9 of the server; a power loss or OS crash can lose the last commits. synchronous=FULL
 * (SQLITE_SYNCHRONOUS=full) fsyncs the WAL on every commit and loses nothing acknowledged.
 *
 * This file opens the database and composes the Store from one module per concern, named as in
 * postgres/: pets.ts, keys.ts, bans.ts, idempotency.ts, settings.ts and migrations.ts.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Store } from '../store.ts';
import { sqliteBans } from './bans.ts';
import { DatabaseSync, isBusy, type Database } from './driver.ts';
import { GroupCommit } from './group-commit.ts';
import { sqliteIdempotency } from './idempotency.ts';
import { sqliteKeys } from './keys.ts';
import { migrate } from './migrations.ts';
import { prepareInsertPet, sqlitePets } from './pets.ts';
import { sqliteSettings } from './settings.ts';

export interface SqliteOptions {
  path: string;
  synchronous: 'normal' | 'full';
}

/**
 * Turning a new file to WAL needs an exclusive lock, which SQLite refuses at once (without the busy
 * handler) when another process is taking its first look at the same new file, as a server and the
 * CLI started together do. The switch is retried for up to busy_timeout's 5 seconds.
 */
function switchToWal(db: Database): void {
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      db.exec('PRAGMA journal_mode = WAL');
      return;
    } catch (err) {
      if (!isBusy(err) || Date.now() > deadline) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20); // at start-up only: a short blocking pause
    }
  }
}

export function openSqliteStore(options: SqliteOptions): Store {
  if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
  const db = new DatabaseSync(options.path);
  // Another process (the CLI, a second server) may hold the write lock briefly.
  db.exec('PRAGMA busy_timeout = 5000');
  switchToWal(db);
  db.exec(`PRAGMA synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  db.exec('PRAGMA foreign_keys = ON');
  migrate(db);

  const insertPet = prepareInsertPet(db);
  const commits = new GroupCommit(db, insertPet);
  const selectOne = db.prepare('SELECT 1');
  let open = true;
  return {
    engine: 'sqlite',
    ...sqlitePets(db, commits),
    ...sqliteKeys(db),
    ...sqliteBans(db),
    ...sqliteIdempotency(db, insertPet),
    ...sqliteSettings(db),

    async ping(): Promise<void> {
      selectOne.get();
    },

    async close(): Promise<void> {
      if (!open) return;
      open = false;
      commits.close();
      db.close();
    },
  };
}
