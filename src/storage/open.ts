/**
 * Opens the engine a DATABASE_URL names. The only place that chooses between engines. Each engine's
 * driver is loaded only when it is chosen, so a process does not carry the other one's code in memory.
 *
 * A database that cannot be used stops the caller with one line naming DATABASE_URL and what is wrong,
 * never its password: a SQLite file whose folder does not exist (a typo would otherwise silently
 * start an empty database elsewhere), or a PostgreSQL server that cannot be reached or refuses us.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError, VARIABLES, type Config, type DatabaseTarget } from '../config.ts';
import type { PostgresOptions } from './postgres/store.ts';
import type { Store } from './store.ts';

/** Where the database is when DATABASE_URL is unset. */
function defaultTarget(): DatabaseTarget {
  const entry = VARIABLES.find((v) => v.names[0] === 'DATABASE_URL')!;
  return entry.read({}, {}) as DatabaseTarget;
}

/**
 * The folder a SQLite file goes in must exist, except the default location's (./data), which is
 * created: a fresh checkout then starts with `npm start` and nothing to set up.
 */
function prepareSqliteFolder(path: string): void {
  if (path === ':memory:') return;
  const folder = dirname(resolve(path));
  const fallback = defaultTarget();
  if (fallback.engine === 'sqlite' && resolve(fallback.path) === resolve(path)) {
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

/** Where a postgres:// URL points, for messages and the log: host, port and database, never the credentials. */
export function describePostgres(url: string): string {
  const parsed = URL.parse(url);
  if (!parsed) return 'PostgreSQL';
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, '')) || '(the default database)';
  return `PostgreSQL at ${parsed.host || 'localhost'}, database ${database}`;
}

/** A driver's message with the URL's password taken out, should a driver ever echo it. */
export function withoutPassword(message: string, url: string): string {
  const password = URL.parse(url)?.password;
  if (!password) return message;
  let decoded = password;
  try {
    decoded = decodeURIComponent(password);
  } catch {
    // not percent-encoded text: the raw form is all there is to take out
  }
  return message.replaceAll(password, '***').replaceAll(decoded, '***');
}

/**
 * The store DATABASE_URL names. `traceSqlite`, given by the server with tracing on, wraps a SQLite
 * store so its calls become spans; PostgreSQL's driver is traced by its own instrumentation. `log`
 * hears what the PostgreSQL store adapts to a transaction pooler in front of the database, and when
 * SQLite writes start failing and recover.
 */
export async function openStore(
  config: Pick<Config, 'database' | 'sqliteSynchronous' | 'sqliteLockWaitMs'>,
  traceSqlite: (store: Store) => Store = (store) => store,
  log?: PostgresOptions['log'],
): Promise<Store> {
  const target = config.database;
  if (target.engine === 'sqlite') {
    prepareSqliteFolder(target.path);
    const { openSqliteStore } = await import('./sqlite/store.ts');
    try {
      return traceSqlite(
        openSqliteStore({ path: target.path, synchronous: config.sqliteSynchronous, lockWaitMs: config.sqliteLockWaitMs, log }),
      );
    } catch (err) {
      throw new Error(`DATABASE_URL names the SQLite file ${resolve(target.path)}, which cannot be opened: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }
  const { openPostgresStore } = await import('./postgres/store.ts');
  try {
    return await openPostgresStore({ url: target.url, log });
  } catch (err) {
    const reason = withoutPassword((err as Error).message || String((err as { code?: unknown }).code ?? err), target.url);
    throw new Error(`DATABASE_URL names ${describePostgres(target.url)}, which cannot be used: ${reason}`, { cause: err });
  }
}
