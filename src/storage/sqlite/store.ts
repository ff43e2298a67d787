/**
 * The embedded engine: SQLite in-process, in WAL mode. Every write commits before its promise resolves
 * (docs/operations.md, "Durability"), all through one writer (writer.ts) that never blocks the event loop on
 * another process's lock; storage faults are 503s (faults.ts), and readiness fails while writes do.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DEFAULT_MIGRATIONS, type MigrationOptions } from '../migration-mode.ts';
import { DEFAULT_MIGRATION_WAIT_MS, type MigrationWait } from '../migration-wait.ts';
import type { Store } from '../store.ts';
import { sqliteBans } from './bans.ts';
import { exact, type Database } from './driver.ts';
import { withFaultsUnavailable } from './faults.ts';
import { GroupCommit } from './group-commit.ts';
import { sqliteIdempotency } from './idempotency.ts';
import { sqliteKeys } from './keys.ts';
import { migrate } from './migrations.ts';
import { openCurrent } from './open-current.ts';
import { prepareInsertPet, sqlitePets } from './pets.ts';
import { sqliteSettings } from './settings.ts';
import { WriteHealth, type WriteLog } from './write-health.ts';
import { SqliteWriter } from './writer.ts';

export interface SqliteOptions {
  path: string;
  synchronous: 'normal' | 'full';
  /** How long a write waits for another process's lock before its 503 (SQLITE_LOCK_WAIT_MS; 2000 by default, as there). */
  lockWaitMs?: number;
  /** Hears when writes start failing and when they recover, once each. */
  log?: WriteLog;
  /** How long opening waits for the write lock another process holds (MIGRATION_LOCK_WAIT_MS, 300 s by default, as there). */
  migrationWait?: MigrationWait;
  /** Whether opening applies missing migrations or refuses the database (MIGRATIONS; apply by default, as there). */
  migrations?: MigrationOptions;
}

/**
 * Turning a new file to WAL needs an exclusive lock, which SQLite refuses at once (without the busy
 * handler) when another process is taking its first look at the same new file, as a server and the
 * CLI started together do: the switch is retried for up to 5 seconds. It takes the shared lock a WAL
 * connection keeps, on the file the path names (open-current.ts: a restore may be swapping it).
 */
function openInWalMode(path: string): Database {
  return openCurrent(path, (db) => db.exec('PRAGMA journal_mode = WAL'), 5000);
}

export function openSqliteStore(options: SqliteOptions): Store {
  if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
  const db = openInWalMode(options.path);
  db.exec(`PRAGMA synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  db.exec('PRAGMA foreign_keys = ON');
  // Another process (the CLI, a second server) may hold the write lock: migrate waits for it on the
  // event loop, which is harmless before the server listens (sqlite/migration-lock.ts).
  try {
    const wait = options.migrationWait ?? { waitMs: DEFAULT_MIGRATION_WAIT_MS };
    migrate(db, resolve(options.path), wait, options.migrations ?? DEFAULT_MIGRATIONS);
  } catch (err) {
    db.close();
    throw err;
  }
  // From here on a held lock refuses at once and writer.ts waits for it on a timer: a busy_timeout
  // would make SQLite sleep on the event loop (at start-up, above, that was harmless).
  db.exec('PRAGMA busy_timeout = 0');

  const writer = new SqliteWriter(db, options.lockWaitMs ?? 2000, new WriteHealth(options.log));
  const insertPet = prepareInsertPet(db);
  const commits = new GroupCommit(db, writer, insertPet);
  const selectOne = db.prepare('SELECT 1');
  // A write that must reach the WAL, to learn whether writes work again: SQLite skips a page whose
  // content an update leaves as it was, so the row gets the moment of each probe.
  const recordProbe = exact(
    db.prepare(`INSERT INTO settings (name, value) VALUES ('write_probe', ?)
    ON CONFLICT (name) DO UPDATE SET value = excluded.value`),
  );
  let open = true;
  return {
    engine: 'sqlite',
    ...withFaultsUnavailable({
      ...sqlitePets(db, commits),
      ...sqliteKeys(db, writer),
      ...sqliteBans(db, writer),
      ...sqliteIdempotency(db, writer, insertPet),
      ...sqliteSettings(db),
    }),

    /** Reads answer, and writes too: after a failed write, one write is tried now (writer.probe). */
    async ping(): Promise<void> {
      selectOne.get();
      await writer.probe(() => recordProbe.run(String(Date.now())));
    },

    async close(): Promise<void> {
      if (!open) return;
      open = false;
      commits.close();
      writer.close();
      db.close();
    },
  };
}
