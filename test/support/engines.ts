/**
 * The engine matrix and its setup: which storage and limiter engines the tests run on. SQLite with
 * the in-process limiter always; PostgreSQL with Redis when PETSTORE_TEST_POSTGRES_URL and
 * PETSTORE_TEST_REDIS_URL are set (scripts/run-tests.ts runs the HTTP suites once per engine,
 * choosing with PETSTORE_TEST_ENGINE). Every PostgreSQL store gets a database of its own, dropped
 * when the test closes it; every Redis limiter a key prefix of its own, whose keys are deleted at close.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../src/domain/clock.ts';
import type { RateLimiter } from '../../src/limits/limiter.ts';
import { MemoryRateLimiter } from '../../src/limits/memory.ts';
import { RedisRateLimiter } from '../../src/limits/redis.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { openPostgresStore } from '../../src/storage/postgres/store.ts';
import { atEnd, type Owner } from './temp.ts';
import { eventually } from './waiting.ts';

/** PETSTORE_TEST_ENGINES=sqlite (see scripts/run-tests.ts) asks for SQLite alone, as if neither were set. */
const SQLITE_ONLY = process.env.PETSTORE_TEST_ENGINES === 'sqlite';
export const POSTGRES_URL = SQLITE_ONLY ? undefined : process.env.PETSTORE_TEST_POSTGRES_URL;
export const REDIS_URL = SQLITE_ONLY ? undefined : process.env.PETSTORE_TEST_REDIS_URL;
export const ENGINE: 'sqlite' | 'postgres' = process.env.PETSTORE_TEST_ENGINE === 'postgres' ? 'postgres' : 'sqlite';

if (ENGINE === 'postgres' && (!POSTGRES_URL || !REDIS_URL)) {
  throw new Error('PETSTORE_TEST_ENGINE=postgres needs PETSTORE_TEST_POSTGRES_URL and PETSTORE_TEST_REDIS_URL');
}

/** Runs work with a PostgreSQL client of its own on url, closed afterwards. */
export async function withPostgres<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const admin = <T>(work: (client: pg.Client) => Promise<T>): Promise<T> => withPostgres(POSTGRES_URL!, work);

/**
 * For a test that needs PostgreSQL (and Redis, when `redis` is set): true when they are configured.
 * Otherwise it says so loudly and skips the test, or fails it under CI=true, where every engine must
 * run, unless PETSTORE_TEST_ENGINES=sqlite asked for the SQLite suite alone.
 */
export function requirePostgres(t: { skip(message: string): void }, what: string, redis = false): boolean {
  if (SQLITE_ONLY) {
    console.log(`# SKIPPED: ${what} (PETSTORE_TEST_ENGINES=sqlite)`);
    t.skip('PETSTORE_TEST_ENGINES=sqlite');
    return false;
  }
  const needed = redis ? 'PETSTORE_TEST_POSTGRES_URL and PETSTORE_TEST_REDIS_URL' : 'PETSTORE_TEST_POSTGRES_URL';
  if (POSTGRES_URL && (!redis || REDIS_URL)) return true;
  console.log('#'.repeat(70) + `\n# SKIPPED: ${what} (set ${needed})\n` + '#'.repeat(70));
  if (process.env.CI === 'true') throw new Error(`CI=true needs ${needed}`);
  t.skip(`${needed} not set`);
  return false;
}

/**
 * A new, empty PostgreSQL database; returns its URL and a function that drops it (dropping twice is
 * harmless). Given an owner, it is dropped when the owner ends, after what was made later stopped.
 */
export async function createTestDatabase(owner?: Owner): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `petstore_test_${randomBytes(6).toString('hex')}`;
  const drop = () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined);
  // Registered first: a CREATE that fails after the database came to be still has it dropped.
  if (owner) atEnd(owner, drop);
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(POSTGRES_URL!);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop };
}

export async function openTestPostgresStore(url: string) {
  return openPostgresStore({ url, poolSize: 4 });
}

/**
 * Resolves once at least n statements of the database are waiting for a lock (a create held up by a
 * test's `LOCK TABLE`), as `observer` sees them; it must not be the locking connection, whose open
 * transaction would keep seeing the activity statistics as it first read them.
 */
export async function untilWaitingOnLocks(observer: pg.Client, databaseUrl: string, n: number, withinMs: number): Promise<void> {
  const name = new URL(databaseUrl).pathname.slice(1);
  await eventually(
    async () => {
      const { rows } = await observer.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'",
        [name],
      );
      return rows[0]!.n >= n;
    },
    withinMs,
    20,
  );
}

/**
 * A Redis key prefix no other test uses, so a test's counters and bans are its own. Given an owner,
 * its keys in the shared Redis (PETSTORE_TEST_REDIS_URL) are deleted when the owner ends; a prefix
 * used only in a Redis of the test's own needs none.
 */
export function newKeyPrefix(owner?: Owner): string {
  const prefix = `petstore-test-${randomBytes(6).toString('hex')}`;
  if (owner) atEnd(owner, () => deleteRedisKeys(prefix));
  return prefix;
}

/** Deletes every Redis key under the prefix: what a test's limiter or server process left behind. */
export async function deleteRedisKeys(keyPrefix: string): Promise<void> {
  if (!REDIS_URL) return; // no shared Redis: nothing can have been written there
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const keys = await redis.keys(`${keyPrefix}:*`);
    if (keys.length) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}

/** A Redis limiter in a key namespace of its own; cleanup() deletes its keys. */
export async function createTestRedisLimiter(
  options: {
    url?: string;
    cluster?: readonly string[];
    tlsCa?: Buffer;
    log?: FastifyBaseLogger;
    metrics?: Metrics;
    keyPrefix?: string;
    timeoutMs?: number;
    /** RATE_LIMIT_BLOCK_MAX; the server's default (100) unless set. */
    maxBlock?: number;
    /** A fake clock the limiter follows instead of Redis's own. */
    clock?: Clock;
    /** Closes the limiter when this test or suite ends, and deletes its keys from the shared Redis. */
    owner?: Owner;
  } = {},
): Promise<RedisRateLimiter & { cleanup(): Promise<void> }> {
  const keyPrefix = options.keyPrefix ?? newKeyPrefix();
  const cleanup = () => deleteRedisKeys(keyPrefix);
  // Keys in a Redis of the test's own go with that Redis.
  const shared = options.cluster === undefined && (options.url ?? REDIS_URL) === REDIS_URL;
  if (options.owner && shared) atEnd(options.owner, cleanup);
  const limiter = new RedisRateLimiter({
    urls: options.cluster ?? [options.url ?? REDIS_URL!],
    cluster: options.cluster !== undefined,
    tlsCa: options.tlsCa,
    keyPrefix,
    log: options.log ?? createLogger('silent'),
    metrics: options.metrics ?? createMetrics(),
    timeoutMs: options.timeoutMs,
    maxBlock: options.maxBlock ?? 100,
    fakeClock: options.clock,
  });
  if (options.owner) atEnd(options.owner, () => limiter.close());
  await limiter.ready();
  return Object.assign(limiter, { cleanup });
}

/** The engine's limiter, its windows following `clock` (the test's fake clock) instead of a real one. */
export async function limiterForEngine(clock: Clock): Promise<{ limiter: RateLimiter; cleanup(): Promise<void> }> {
  if (ENGINE === 'sqlite') return { limiter: new MemoryRateLimiter({ clock }), cleanup: async () => undefined };
  const limiter = await createTestRedisLimiter({ clock });
  return { limiter, cleanup: () => limiter.cleanup() };
}
