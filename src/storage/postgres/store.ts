/**
 * The scale-out engine: PostgreSQL through a pg connection pool. Every instance of the service shares
 * it. int8 columns arrive as strings (pg's default) and become bigint in the row mapper, so nothing
 * above 2^53 loses precision. Connection attempts and statements have short timeouts so that an
 * unreachable database becomes a quick 503, never a hanging request.
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
import { postgresPets, UnacknowledgedCreates } from './pets.ts';
import { queryOn } from './query.ts';
import { postgresSettings } from './settings.ts';

export interface PostgresOptions {
  url: string;
  /** Connections per instance. */
  poolSize?: number;
  /** Upper bound for connecting and for each statement. */
  timeoutMs?: number;
}

export async function openPostgresStore(options: PostgresOptions): Promise<Store> {
  // Waiting for a pooled connection and running the statement are each bounded: 503 within ~4 s.
  const timeoutMs = options.timeoutMs ?? 2000;
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
    statement_timeout: timeoutMs,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  try {
    await migrate(pool);
  } catch (err) {
    // The first statement is where an unreachable server or a refused login shows: the pool is
    // closed so that nothing keeps retrying behind the caller's error.
    await pool.end().catch(() => undefined);
    throw err;
  }

  const query = queryOn(pool);
  const unacknowledged = new UnacknowledgedCreates(pool);
  return {
    engine: 'postgres',
    ...postgresPets(query, unacknowledged),
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
      await unacknowledged.close();
      await pool.end();
    },
  };
}
