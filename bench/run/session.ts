/** What the run makes (a folder, servers, databases, Redis keys) and takes away at the end, on failure and on interrupt. */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { holdIdlePolling } from '../idle-polling.ts';
import { stopWrk } from '../wrk.ts';
import { stopServer, type Server } from './servers.ts';
import { PG_URL, REDIS_PREFIX, REDIS_URL } from './settings.ts';

export const started = Date.now();
export const work = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
let nextPort = 19100;

/** A port for the next server: each its own, counted up from 19100. */
export function takePort(): number {
  return nextPort++;
}
// Held from the start, so that the data is prepared and every run measured alike (idle-polling.ts).
export const idlePolling = holdIdlePolling();

// Clean-up: servers, databases, Redis keys and files go at the end, on failure and on interrupt.

export const made = { servers: [] as Server[], databases: [] as string[], redis: false };
let cleaning: Promise<void> | undefined;

export function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    const step = async (what: string, f: () => Promise<unknown>) => {
      try {
        await f();
      } catch (err) {
        console.error(`clean-up, ${what}: ${(err as Error).message}`);
      }
    };
    stopWrk();
    idlePolling.release();
    // Servers first: they hold database connections and would write Redis keys after their removal.
    await step('servers', () => Promise.all(made.servers.map(stopServer)));
    for (const name of made.databases) {
      await step(`database ${name}`, async () => {
        const c = new pg.Client({ connectionString: PG_URL });
        await c.connect();
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await c.end();
      });
    }
    if (made.redis) {
      await step('Redis keys', async () => {
        const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0 });
        await redis.connect();
        let cursor = '0';
        do {
          const [next, keys] = await redis.scan(cursor, 'MATCH', `${REDIS_PREFIX}*`, 'COUNT', 1000);
          if (keys.length) await redis.del(...keys);
          cursor = next;
        } while (cursor !== '0');
        redis.disconnect();
      });
    }
    rmSync(work, { recursive: true, force: true });
  })();
  return cleaning;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  });
}
