/**
 * `petstore backup FILE` and `petstore restore FILE`: the embedded SQLite database copied while
 * servers run, and replaced by such a copy while none does (storage/sqlite/backup.ts, restore.ts).
 * PostgreSQL has its own tools, which these commands name rather than imitate (docs/operations.md).
 */
import { resolve } from 'node:path';
import type { Config } from '../config.ts';
import type { DatabaseSummary } from '../storage/sqlite/summary.ts';
import { StateError } from './errors.ts';
import { printable } from './printable.ts';

const DOCS = 'see docs/operations.md, "Backups"';

/** The SQLite file DATABASE_URL names, or the one-line refusal that points PostgreSQL to its tools. */
async function sqliteTarget(config: Config, command: 'backup' | 'restore'): Promise<{ path: string; createFolder?: boolean }> {
  const target = config.database;
  if (target.engine === 'postgres') {
    const { describePostgres } = await import('../storage/open.ts');
    const tool = command === 'backup' ? 'back it up with pg_dump' : 'restore it with pg_restore or psql';
    throw new StateError(
      `${command} is for the embedded SQLite database; DATABASE_URL names ${describePostgres(target.url)}: ${tool} (${DOCS})`,
    );
  }
  if (target.path === ':memory:')
    throw new StateError(`DATABASE_URL names an in-memory SQLite database, which no file holds: nothing to ${command}`);
  return target;
}

function size(bytes: number): string {
  return bytes < 1e6 ? `${(bytes / 1e3).toFixed(1)} kB` : `${(bytes / 1e6).toFixed(1)} MB`;
}

const counted = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

const holds = (s: DatabaseSummary) =>
  `${counted(s.pets, 'pet')} and ${counted(s.keys, 'API key')} (schema version ${s.schemaVersion}, ${size(s.bytes)})`;

const seconds = (startedMs: number) => `${((performance.now() - startedMs) / 1000).toFixed(1)} s`;

export async function backup(config: Config, file: string, force: boolean): Promise<void> {
  const database = (await sqliteTarget(config, 'backup')).path;
  const { backupSqlite } = await import('../storage/sqlite/backup.ts');
  const started = performance.now();
  const copied = backupSqlite(database, file, { force });
  console.log(printable(`Backed up ${holds(copied)} from ${resolve(database)} to ${resolve(file)} in ${seconds(started)}.`));
}

export async function restore(config: Config, file: string): Promise<void> {
  const target = await sqliteTarget(config, 'restore');
  const database = target.path;
  const [{ restoreSqlite }, { LATEST_SQLITE_VERSION }, { prepareSqliteFolder }] = await Promise.all([
    import('../storage/sqlite/restore.ts'),
    import('../storage/sqlite/migrations.ts'),
    import('../storage/open.ts'),
  ]);
  const started = performance.now();
  prepareSqliteFolder(database, target.createFolder === true);
  const restored = restoreSqlite(file, database);
  console.log(printable(`Restored ${holds(restored)} from ${resolve(file)} into ${resolve(database)} in ${seconds(started)}.`));
  if (restored.petIdsContinueAfter !== undefined) {
    console.log(
      `New pets get ids above ${restored.petIdsContinueAfter}, the highest the replaced database handed out: no id is given twice.`,
    );
  }
  if (restored.schemaVersion < LATEST_SQLITE_VERSION) {
    const versions = `from schema version ${restored.schemaVersion} to ${LATEST_SQLITE_VERSION}`;
    console.log(`The next start (of the server or any petstore command) migrates it ${versions}.`);
  }
}
