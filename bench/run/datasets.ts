/** The data each service serves: SQLite files and PostgreSQL databases of 1k to 1M pets, with a key and a deep cursor. */

import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createKey } from '../../src/cli/keys.ts';
import { CursorCodec } from '../../src/domain/cursor.ts';
import type { PetStatus } from '../../src/domain/pet.ts';
import { openPostgresStore } from '../../src/storage/postgres/store.ts';
import { DatabaseSync, inWriteTransaction } from '../../src/storage/sqlite/driver.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import type { Store } from '../../src/storage/store.ts';
import { createMixKeys, type MixKeys } from '../mix.ts';
import { made, work } from './session.ts';
import { PG_URL, REDIS_URL } from './settings.ts';

// Data

export interface Dataset {
  databaseUrl: string;
  key: string;
  cursorSecret: string;
  /** A cursor 40 pets before the end: the deepest full page. */
  deepCursor: string;
  mix?: MixKeys;
}

/** Status of each pet by id: `pattern[id % pattern.length]`. */
type StatusPattern = readonly PetStatus[];

async function finish(store: Store, count: number, databaseUrl: string, mixRuns: number, partsPerRun: number): Promise<Dataset> {
  const { key } = await createKey(store, 'production', { plan: 'enterprise', rpm: '2000000000', rpd: '2000000000' });
  const cursorSecret = await store.cursorSecret();
  const deepCursor = new CursorCodec(cursorSecret).encode({ afterId: BigInt(count - 40), status: undefined });
  const mix = mixRuns > 0 ? await createMixKeys(store, mixRuns, partsPerRun) : undefined;
  await store.close();
  return { databaseUrl, key, cursorSecret, deepCursor, ...(mix ? { mix } : {}) };
}

export async function sqliteDataset(name: string, count: number, pattern: StatusPattern, mixRuns = 0, partsPerRun = 1): Promise<Dataset> {
  const path = join(work, `${name}.db`);
  await openSqliteStore({ path, synchronous: 'normal' }).close(); // creates and migrates
  const db = new DatabaseSync(path);
  const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)');
  inWriteTransaction(db, () => {
    for (let i = 1; i <= count; i++) insert.run(`pet ${i}`, i, pattern[i % pattern.length]!);
  });
  db.close();
  return finish(openSqliteStore({ path, synchronous: 'normal' }), count, `sqlite:${path}`, mixRuns, partsPerRun);
}

export async function postgresDataset(name: string, count: number, pattern: StatusPattern, mixRuns = 0, partsPerRun = 1): Promise<Dataset> {
  const dbName = `petstore_bench_${name}_${process.pid}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  made.databases.push(dbName);
  await admin.end();
  const url = new URL(PG_URL);
  url.pathname = `/${dbName}`;
  const store = await openPostgresStore({ url: url.toString() });
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  await client.query(
    `INSERT INTO pets (name, category_id, status)
     SELECT 'pet ' || g, g, ($2::text[])[1 + g % $3] FROM generate_series(1, $1) g`,
    [count, pattern, pattern.length],
  );
  await client.query('VACUUM ANALYZE pets');
  await client.end();
  return finish(store, count, url.toString(), mixRuns, partsPerRun);
}

export async function postgresReachable(): Promise<boolean> {
  if (process.env.BENCH_SKIP_POSTGRES === '1') return false;
  try {
    const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
    await c.connect();
    await c.end();
    const r = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0 });
    await r.connect();
    r.disconnect();
    return true;
  } catch {
    return false;
  }
}

/** Made on first use, so that a BENCH_ONLY run prepares only what its scenarios need. */
export function once<T>(make: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () => (value ??= make());
}
