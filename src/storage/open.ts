/**
 * Opens the engine a DATABASE_URL names. The only place that chooses between engines. Each engine's
 * driver is loaded only when it is chosen, so a process does not carry the other one's code in memory.
 *
 * A database that cannot be used stops the caller with one line naming DATABASE_URL and what is wrong,
 * never its password: a SQLite file whose folder does not exist (a typo would otherwise silently
 * start an empty database elsewhere), or a PostgreSQL server that cannot be reached or refuses us. A
 * migration lock that another process holds past MIGRATION_LOCK_WAIT_MS stops it with a line naming the
 * lock, the wait and the setting (migration-wait.ts); a database behind this release under
 * MIGRATIONS=refuse, or a migration that fails, with a line naming the database and its versions
 * (migration-mode.ts).
 */
import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../config.ts';
import { ConfigError } from '../config/variable.ts';
import { withoutPassword } from '../domain/redaction.ts';
import { MigrationError, type MigrationOptions } from './migration-mode.ts';
import { MigrationLockTimeoutError, type MigrationWait } from './migration-wait.ts';
import type { PostgresOptions } from './postgres/store.ts';
import type { SqliteOptions } from './sqlite/store.ts';
import type { Store } from './store.ts';

/**
 * A database DATABASE_URL names. `createFolder`: the default location's folder (./data) is created,
 * so a fresh checkout starts with `npm start` and nothing to set up; any other must exist.
 */
export type DatabaseTarget = { engine: 'sqlite'; path: string; createFolder?: boolean } | { engine: 'postgres'; url: string };

export interface OpenOptions {
  /** SQLITE_SYNCHRONOUS and SQLITE_LOCK_WAIT_MS; PostgreSQL ignores them. */
  synchronous: SqliteOptions['synchronous'];
  lockWaitMs: number;
  /**
   * MIGRATION_LOCK_WAIT_MS, and who hears, once, that opening waits for the lock another process holds
   * while it migrates (PostgreSQL's advisory lock, SQLite's write lock).
   */
  migrationWait: MigrationWait;
  /** MIGRATIONS and MIGRATION_STATEMENT_TIMEOUT_MS: apply what is missing, or refuse a database behind this release. */
  migrations: MigrationOptions;
  /** Given by the server with tracing on: wraps a SQLite store so its calls become spans. */
  traceSqlite?: (store: Store) => Store;
  /** Hears what the PostgreSQL store adapts to a transaction pooler, and SQLite writes failing and recovering. */
  log?: PostgresOptions['log'];
  /** Connections the PostgreSQL pool may open (10 unless said): a worker's share of the process's (docs/workers.md). */
  poolSize?: number;
}

/**
 * How a server opens its store, from the configuration: the migrations as MIGRATIONS says, a wait for the
 * migration lock said once on `log`, which also hears what the store adapts to. The supervisor of several
 * workers opens it so to migrate once; each worker, and one server alone, to serve.
 */
export function serverOpenOptions(
  config: Pick<Config, 'sqliteSynchronous' | 'sqliteLockWaitMs' | 'migrationLockWaitMs' | 'migrations' | 'migrationStatementTimeoutMs'>,
  log: { info(message: string): void; warn(message: string): void },
): OpenOptions {
  return {
    synchronous: config.sqliteSynchronous,
    lockWaitMs: config.sqliteLockWaitMs,
    migrationWait: { waitMs: config.migrationLockWaitMs, onWait: (message) => log.warn(message) },
    migrations: { mode: config.migrations, statementTimeoutMs: config.migrationStatementTimeoutMs },
    log: { info: (message) => log.info(message), warn: (message) => log.warn(message) },
  };
}

/** Refuses a SQLite file whose folder does not exist, or creates the folder when `create` says so. */
export function prepareSqliteFolder(path: string, create: boolean): void {
  if (path === ':memory:') return;
  const folder = dirname(resolve(path));
  if (create) {
    mkdirSync(folder, { recursive: true });
    return;
  }
  let isFolder: boolean;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch {
    isFolder = false;
  }
  if (!isFolder) {
    throw new ConfigError(
      `DATABASE_URL names a SQLite file in ${folder}, which is not an existing folder; create it, or point DATABASE_URL elsewhere`,
    );
  }
}

/**
 * Why a SQLite path SQLite could not open cannot be opened, and what to do, where the file system tells:
 * a folder named instead of a file, or a folder or file this process cannot write (SQLite writes the
 * database's -wal and -shm files beside it). Undefined when it does not tell.
 */
function sqliteOpenAdvice(path: string): string | undefined {
  const file = resolve(path);
  const folder = dirname(file);
  try {
    if (statSync(file).isDirectory()) return `it is a folder: name a file in it, e.g. DATABASE_URL=sqlite:${join(file, 'petstore.db')}`;
  } catch {
    // No such file: SQLite would create it in the folder, checked next.
  }
  for (const [what, at] of [
    ['the folder', folder],
    ['the file', file],
  ] as const) {
    try {
      accessSync(at, constants.W_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EROFS')
        return (
          `${what} ${at} is on a read-only file system; SQLite writes the database and its -wal and -shm files there: ` +
          'point DATABASE_URL at a writable folder, or mount it read-write'
        );
      if (code === 'EACCES' || code === 'EPERM')
        return (
          `this process (user ${process.getuid?.() ?? '?'}) may not write ${what} ${at}; SQLite writes the database and its ` +
          '-wal and -shm files there: give that user write access, or point DATABASE_URL elsewhere'
        );
    }
  }
  return undefined;
}

/** Where a postgres:// URL points, for messages and the log: host, port and database, never the credentials. */
export function describePostgres(url: string): string {
  const parsed = URL.parse(url);
  if (!parsed) return 'PostgreSQL';
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, '')) || '(the default database)';
  return `PostgreSQL at ${parsed.host || 'localhost'}, database ${database}`;
}

/** The database a target names, in messages: the SQLite file's absolute path, or where PostgreSQL is. */
export function describeDatabase(target: DatabaseTarget): string {
  return target.engine === 'sqlite' ? `the SQLite file ${resolve(target.path)}` : describePostgres(target.url);
}

/** The store a target names; PostgreSQL's driver is traced by its own instrumentation. */
export async function openStore(
  target: DatabaseTarget,
  { synchronous, lockWaitMs, migrationWait, migrations, traceSqlite = (s) => s, log, poolSize }: OpenOptions,
): Promise<Store> {
  if (target.engine === 'sqlite') {
    prepareSqliteFolder(target.path, target.createFolder === true);
    const { openSqliteStore } = await import('./sqlite/store.ts');
    try {
      return traceSqlite(openSqliteStore({ path: target.path, synchronous, lockWaitMs, log, migrationWait, migrations }));
    } catch (err) {
      // The database can be used, only not yet: the message names the file, the lock and the setting.
      if (err instanceof MigrationLockTimeoutError) throw err;
      if (err instanceof MigrationError) throw err.naming(describeDatabase(target));
      const advice = sqliteOpenAdvice(target.path);
      throw new Error(
        `DATABASE_URL names the SQLite file ${resolve(target.path)}, which cannot be opened: ${advice ?? (err as Error).message}`,
        { cause: err },
      );
    }
  }
  const { openPostgresStore } = await import('./postgres/store.ts');
  try {
    return await openPostgresStore({ url: target.url, log, migrationWait, migrations, poolSize });
  } catch (err) {
    if (err instanceof MigrationError) throw err.naming(describeDatabase(target));
    if (err instanceof MigrationLockTimeoutError) {
      throw new MigrationLockTimeoutError(`${describePostgres(target.url)}: ${err.message}`, { cause: err });
    }
    const reason = withoutPassword((err as Error).message || String((err as { code?: unknown }).code ?? err), target.url);
    throw new Error(`DATABASE_URL names ${describePostgres(target.url)}, which cannot be used: ${reason}`, { cause: err });
  }
}
