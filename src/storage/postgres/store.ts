/**
 * The scale-out engine: PostgreSQL through a pg pool (int8 read as bigint), with short timeouts so that an
 * unreachable database is a quick 503. Nothing relies on a session, for transaction poolers (docs/scale-out.md);
 * a pooler that refuses statement_timeout as a startup parameter gets the pool opened again without it.
 */
import { POSTGRES_POOL_SIZE } from './pool-size.ts';
import pg from 'pg';
import { DEFAULT_MIGRATIONS, type MigrationOptions } from '../migration-mode.ts';
import { DEFAULT_MIGRATION_WAIT_MS, type MigrationWait } from '../migration-wait.ts';
import type { Store } from '../store.ts';
import { postgresBans } from './bans.ts';
import { postgresIdempotency } from './idempotency.ts';
import { postgresKeys } from './keys.ts';
import { migrate } from './migrations.ts';
import { postgresPets } from './pets.ts';
import { queryOn } from './query.ts';
import { postgresSettings } from './settings.ts';

export interface PostgresOptions {
  url: string;
  /** Connections per instance. */
  poolSize?: number;
  /** Upper bound for connecting and for each statement. */
  timeoutMs?: number;
  /** Told what was adapted to a transaction pooler in front of PostgreSQL. */
  log?: { info(message: string): void; warn(message: string): void };
  /** How long opening waits for the migration lock another session holds (MIGRATION_LOCK_WAIT_MS, 300 s by default, as there). */
  migrationWait?: MigrationWait;
  /**
   * Whether opening applies missing migrations or refuses the database, and the bound on their statements
   * (MIGRATIONS, MIGRATION_STATEMENT_TIMEOUT_MS; apply and 5 minutes by default, as there).
   */
  migrations?: MigrationOptions;
}

/** A pooler's refusal of a startup parameter it does not pass on (PgBouncer: 08P01). */
function refusesStartupParameter(err: unknown): boolean {
  return /unsupported startup parameter/i.test((err as Error).message ?? '');
}

export async function openPostgresStore(options: PostgresOptions): Promise<Store> {
  // Waiting for a pooled connection and running the statement are each bounded: 503 within ~4 s.
  const timeoutMs = options.timeoutMs ?? 2000;
  const openPool = (serverTimeout: boolean): pg.Pool => {
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize ?? POSTGRES_POOL_SIZE,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
      ...(serverTimeout ? { statement_timeout: timeoutMs } : {}),
      idleTimeoutMillis: 30_000,
      keepAlive: true,
      // Names this service's sessions in pg_stat_activity: who holds the migration lock, say. Every
      // pooler passes it on.
      application_name: 'petstore',
    });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    pool.on('error', () => undefined);
    return pool;
  };
  const migrated = async (pool: pg.Pool): Promise<pg.Pool> => {
    try {
      const wait = options.migrationWait ?? { waitMs: DEFAULT_MIGRATION_WAIT_MS };
      await migrate(pool, timeoutMs, wait, options.migrations ?? DEFAULT_MIGRATIONS);
      return pool;
    } catch (err) {
      // The first statement is where an unreachable server or a refused login shows: the pool is
      // closed so that nothing keeps retrying behind the caller's error.
      await pool.end().catch(() => undefined);
      throw err;
    }
  };

  let pool: pg.Pool;
  try {
    pool = await migrated(openPool(true));
  } catch (err) {
    if (!refusesStartupParameter(err)) throw err;
    options.log?.info(
      'PostgreSQL is reached through a pooler that refuses statement_timeout at connection start: ' +
        'statements are bounded by the client only (set statement_timeout on the role to bound them on the server)',
    );
    pool = await migrated(openPool(false));
  }

  const query = queryOn(pool, {
    onUnnamed: () =>
      options.log?.warn(
        'PostgreSQL is reached through a transaction pooler that does not keep prepared statements: ' +
          'statements are sent unnamed from now on',
      ),
  });
  return {
    engine: 'postgres',
    ...postgresPets(query),
    ...postgresKeys(query),
    ...postgresBans(query),
    ...postgresIdempotency(query),
    ...postgresSettings(query),

    poolStats() {
      return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
    },

    async ping(): Promise<void> {
      await query('SELECT 1');
    },

    async close(): Promise<void> {
      await pool.end();
    },
  };
}
