/**
 * The scale-out engine: PostgreSQL through a pg connection pool. Every instance of the service shares
 * it. int8 columns arrive as strings (pg's default) and become bigint in the row mapper, so nothing
 * above 2^53 loses precision. Connection attempts and statements have short timeouts so that an
 * unreachable database becomes a quick 503, never a hanging request.
 *
 * Behind a transaction pooler (PgBouncer with pool_mode = transaction) nothing of a session may be
 * relied on: each statement or transaction can run on another server connection. So the store sets no
 * session settings, takes only transaction-scoped advisory locks (migrations.ts) and never LISTENs;
 * named statements fall back to unnamed ones by themselves (query.ts). The one session thing it asks
 * for is statement_timeout as a startup parameter, which a pooler refuses with its default settings
 * ("unsupported startup parameter"): the pool is then opened again without it. Statements stay bounded
 * by the client's query_timeout (the request gets its 503 in time) and, on the server, by whatever the
 * role sets (`ALTER ROLE ... SET statement_timeout`, README "PgBouncer").
 *
 * This file opens the pool and composes the Store from one module per concern, named as in sqlite/:
 * pets.ts, keys.ts, bans.ts, idempotency.ts, settings.ts and migrations.ts; query.ts sends statements.
 */
import pg from 'pg';
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
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
      ...(serverTimeout ? { statement_timeout: timeoutMs } : {}),
      idleTimeoutMillis: 30_000,
      keepAlive: true,
    });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    pool.on('error', () => undefined);
    return pool;
  };
  const migrated = async (pool: pg.Pool): Promise<pg.Pool> => {
    try {
      await migrate(pool, timeoutMs);
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
