/**
 * `npm run bench`: what a request costs the service, in CPU time, next to a bare node:http ceiling
 * and a bare Fastify floor measured in the same run; with requests per second, p50 and p99 latency
 * and peak memory alongside.
 *
 * The figure that counts is CPU time per request: each server's utime + stime from /proc, read just
 * before and after each wrk run, divided by the requests wrk saw answered. On a shared machine
 * requests per second move with whoever else has the core; CPU time per request barely does, since
 * time a server does not run is not charged to it. Each scenario's ratio is the ceiling's CPU per
 * request over its own, from the same round (1.0 is the ceiling; higher is better); the tables give
 * the median and the spread over rounds.
 *
 * Each server is pinned to core 0 and wrk (one thread) to core 1. Idle cores poll rather than halt
 * while the benchmark runs, so that waking wrk costs a server alike on every machine (idle-polling.ts;
 * it needs root). Every scenario runs once per round after a warm-up (longer for the mixes); rounds
 * alternate the order. Each service process serves only its own scenarios, so its peak RSS is that
 * of its own work. The service runs as built (`dist/cli/main.js serve`), with LOG_LEVEL=warn,
 * authenticated with an Enterprise key whose limits no run reaches (the limiter is exercised, never
 * refusing); the realistic mix uses 1,000 keys of four plans (bench/mix.ts).
 *
 * Environment: BENCH_ROUNDS (5), BENCH_SECONDS (4), BENCH_CONNECTIONS (64), BENCH_POSTGRES_URL
 * (postgres://postgres@127.0.0.1:5432/postgres), BENCH_REDIS_URL (redis://127.0.0.1:6379),
 * BENCH_SKIP_POSTGRES=1 to leave PostgreSQL + Redis out, BENCH_ONLY=<regex> to run only the scenarios
 * whose label matches (the ceiling and the floor always run), BENCH_JSON_SERVER=1 to add json-server
 * as a row for reference, BENCH_STRICT=1 to exit with status 1 when a budget line is missed,
 * BENCH_IDLE_POLL=0 to leave idle cores halting as the machine has them, BENCH_AB='<words>[|<words>...]'
 * and BENCH_B_CHECKOUT=<dir> for an A/B in one run (below).
 *
 * The service starts as `npm start` starts it: node with the flags the start script names, if any.
 * BENCH_AB takes words as `env -S` does (NAME=value for a variable, anything else a flag for node,
 * e.g. `MALLOC_ARENA_MAX=1 --no-maglev`, or '' for none), several ways separated by `|`: every chosen
 * service scenario then runs once more per way, on its own process, labelled [B], [C], ..., in the
 * same alternating rounds; the report adds each one's budget and a table of its CPU per request over
 * A's, paired round by round, with RSS at start and at the peak beside the ceiling's. BENCH_B_CHECKOUT=<dir>
 * makes them run another checkout's build (built first), for an A/B of two builds: started as its own
 * `npm start` starts it unless BENCH_AB says otherwise. BENCH_A_LAUNCH=<words> starts A otherwise ('' for a
 * bare `petstore serve`). BENCH_GUARD and BENCH_A_SLOWDOWN: bench/guard.ts.
 *
 * A scenario with request headers, e.g. a conditional request answered 304 (wrk counts 3xx answers
 * as successes), is one entry in `scenarios()` below:
 *   { label: 'SQLite 1k: GET /v1/pets?limit=20, If-None-Match', server: 'sqlite-1k', path: LIST, expect: 304,
 *     headers: (first) => ({ 'If-None-Match': first.headers.get('etag')! }) }
 * or `headers: { 'Accept-Encoding': 'br' }`. Before the warm-up each scenario's request is sent once
 * and must get its expected status.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createKey } from '../src/cli/keys.ts';
import { CursorCodec } from '../src/domain/cursor.ts';
import { PET_STATUSES, type PetStatus } from '../src/domain/pet.ts';
import { openPostgresStore } from '../src/storage/postgres/store.ts';
import { DatabaseSync, inWriteTransaction } from '../src/storage/sqlite/driver.ts';
import { openSqliteStore } from '../src/storage/sqlite/store.ts';
import type { Store } from '../src/storage/store.ts';
import { assertNodeProcess, CLK_TCK, coreTimes, cpuTicks, peakRssMiB, rssMiB, type CoreTimes } from './cpu.ts';
import {
  createMixKeys,
  mergeMixCounts,
  MIX_PETS,
  MIX_STATUS_PATTERN,
  parseMixCounts,
  writeMixData,
  type MixCounts,
  type MixKeys,
} from './mix.ts';
import { launchOf, startLaunch, type Launch } from '../scripts/start-command.ts';
import { pageCacheOff } from './cache-switches.ts';
import { holdIdlePolling } from './idle-polling.ts';
import { referencePackage } from './reference-packages.ts';
import { luaString, stopWrk, wrk, type WrkReport } from './wrk.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const WARMUP_SECONDS = 3;
/**
 * The realistic mix runs through far more of the server's code than one repeated request, and its
 * CPU per request went on falling for some 10 s of load: on one machine 132.7, 92.5, 80.1, 74.6 and
 * 78.9 µs over five rounds after 3 s, while V8's optimising compiler took 10 % of the server's CPU in
 * the first seconds and 2.6 % after 24 (BENCHMARKS.md). The budget is about a server that has been
 * running, so the mixes warm up for longer.
 */
const MIX_WARMUP_SECONDS = 15;
const SETTLE_MS = 300;
/** Clock ticks a run needs for CPU per request to be known within 2 %; runs with fewer give no ratio. */
const MIN_TICKS = 50;
/** A run short of MIN_TICKS goes on, up to this many times its length. */
const MAX_PARTS = 3;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const PG_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : undefined;
const REDIS_PREFIX = `petstore-bench-${process.pid}-`;

/** One way of starting the service: A as `npm start` does; B, C, ... as BENCH_AB says, in the same run. */
interface Variant {
  letter: string;
  launch: Launch;
  /** The checkout whose build runs; undefined: this one. */
  checkout: string | undefined;
}

/** How `npm start` starts the service: its variables and Node.js flags (scripts/start-command.ts). */
const START = startLaunch();
/**
 * BENCH_GUARD=<factor>: the CPU guard (bench/guard.ts). The run fails when, for any service scenario,
 * A's CPU per request over B's, paired round by round, has a median above the factor; the floor is
 * left out, and every scenario chosen must be measured.
 */
const GUARD = process.env.BENCH_GUARD ? Number(process.env.BENCH_GUARD) : undefined;
/** BENCH_A_LAUNCH=<words>: A started otherwise than `npm start` does ('' for a bare `petstore serve`). */
const A_LAUNCH = process.env.BENCH_A_LAUNCH === undefined ? START : launchOf(process.env.BENCH_A_LAUNCH);
/** BENCH_A_SLOWDOWN=<share>: A spends that share more CPU time (bench/slowdown.mjs), to show the guard fails. */
const SLOWDOWN = process.env.BENCH_A_SLOWDOWN;
const A: Variant = {
  letter: 'A',
  launch: SLOWDOWN
    ? {
        env: { ...A_LAUNCH.env, BENCH_SLOWDOWN: SLOWDOWN },
        flags: [`--import=${join(import.meta.dirname, 'slowdown.mjs')}`, ...A_LAUNCH.flags],
      }
    : A_LAUNCH,
  checkout: undefined,
};
/**
 * BENCH_AB: ways separated by `|`, lettered B, C, ...; BENCH_B_CHECKOUT: another checkout's build runs
 * them, as its own `npm start` does unless BENCH_AB says how.
 */
const OTHERS: Variant[] = (() => {
  const checkout = process.env.BENCH_B_CHECKOUT;
  const launches =
    process.env.BENCH_AB !== undefined ? process.env.BENCH_AB.split('|').map(launchOf) : checkout ? [startLaunch(checkout)] : [];
  return launches.map((launch, i) => ({ letter: String.fromCharCode(66 + i), launch, checkout }));
})();
const labelOf = (v: Variant) => (v === A ? '' : ` [${v.letter}]`);
const serverOf = (v: Variant) => (v === A ? '' : `+${v.letter}`);
const describeVariant = (v: Variant) =>
  `${v.letter} = ${v.checkout ?? 'this checkout'}, ` +
  ([...Object.entries(v.launch.env).map(([k, x]) => `${k}=${x}`), ...v.launch.flags].join(' ') || 'no flags');
const started = Date.now();
const work = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
let nextPort = 19100;
// Held from the start, so that the data is prepared and every run measured alike (idle-polling.ts).
const idlePolling = holdIdlePolling();

// ------------------------------------------------------------------------------------------------
// Clean-up: servers, databases, Redis keys and files go at the end, on failure and on interrupt.

const made = { servers: [] as Server[], databases: [] as string[], redis: false };
let cleaning: Promise<void> | undefined;

function cleanUp(): Promise<void> {
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

// ------------------------------------------------------------------------------------------------
// Data

interface Dataset {
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

async function sqliteDataset(name: string, count: number, pattern: StatusPattern, mixRuns = 0, partsPerRun = 1): Promise<Dataset> {
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

async function postgresDataset(name: string, count: number, pattern: StatusPattern, mixRuns = 0, partsPerRun = 1): Promise<Dataset> {
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

async function postgresReachable(): Promise<boolean> {
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
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () => (value ??= make());
}

// ------------------------------------------------------------------------------------------------
// Servers

interface Server {
  name: string;
  url: string;
  pid: number;
  child: ChildProcess;
  /** The service (not the ceiling, the floor or json-server): its memory is in the budget. */
  service: boolean;
  dataset?: Dataset;
  /** Resident memory as soon as it answered, before any load. */
  idleRssMiB?: number;
}

async function startPinned(
  name: string,
  command: string,
  args: string[],
  env: Record<string, string>,
  readyUrl: string,
  extra: Pick<Server, 'service' | 'dataset'>,
): Promise<Server> {
  const child = spawn('taskset', ['-c', '0', command, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const server: Server = { name, url: new URL(readyUrl).origin, pid: child.pid!, child, ...extra };
  made.servers.push(server);
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await fetch(readyUrl);
      break;
    } catch {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${name} did not start`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  assertNodeProcess(server.pid, name);
  server.idleRssMiB = rssMiB(server.pid);
  return server;
}

async function stopServer(s: Server): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return;
  const exited = new Promise((r) => s.child.once('exit', r));
  s.child.kill('SIGTERM');
  const timer = setTimeout(() => s.child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function startReference(name: string, args: (port: number) => string[], path: string): Promise<Server> {
  const port = nextPort++;
  return startPinned(name, process.execPath, args(port), {}, `http://127.0.0.1:${port}${path}`, { service: false });
}

async function startService(
  name: string,
  variant: Variant,
  dataset: Dataset,
  redis: boolean,
  extra: Record<string, string> = {},
): Promise<Server> {
  const port = nextPort++;
  // wrk's connections all come from 127.0.0.1: no per-address connection cap, whatever BENCH_CONNECTIONS says.
  const env: Record<string, string> = {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: dataset.databaseUrl,
    LOG_LEVEL: 'warn',
    MAX_CONNECTIONS_PER_ADDRESS: '0',
    ...extra,
  };
  if (redis) {
    made.redis = true;
    Object.assign(env, { REDIS_URL, REDIS_KEY_PREFIX: `${REDIS_PREFIX}${port}` });
  }
  // Run as `npm start` runs it: node with the start script's flags (if any), on this Node.js; the
  // variant's allocator variables and flags, in a BENCH_AB run, instead.
  const { env: variantEnv, flags } = variant.launch;
  const command = join(variant.checkout ?? '.', 'dist/cli/main.js');
  return startPinned(name, process.execPath, [...flags, command, 'serve'], { ...env, ...variantEnv }, `http://127.0.0.1:${port}/healthz`, {
    service: true,
    dataset,
  });
}

// ------------------------------------------------------------------------------------------------
// Scenarios

type Headers = Record<string, string>;

interface Scenario {
  label: string;
  /** The server process that serves it; a service process serves only its own scenarios. */
  server: string;
  /** The request's path, or one made from the server's data (a cursor). */
  path: string | ((d: Dataset) => string);
  method?: 'GET' | 'POST';
  body?: string;
  /** Extra request headers, or ones made from a first answer to the same request (an ETag, say). */
  headers?: Headers | ((first: Response) => Headers | Promise<Headers>);
  /** The status every answer should have: 200, or 201 for POST, unless set. */
  expect?: number;
  /** The realistic mix (bench/mix.lua) rather than one request repeated. */
  mix?: boolean;
}

const L = {
  ceiling: 'ceiling: node:http, 20 pets from memory',
  floor: 'floor: bare Fastify route, 20 pets pre-serialised',
  sqliteList: 'SQLite 1k: GET /v1/pets?limit=20',
  sqliteList1m: 'SQLite 1M: GET /v1/pets?limit=20',
  sqliteNoCache: 'SQLite 1k, no page cache: GET /v1/pets?limit=20',
  sqliteGet: 'SQLite 1k: GET /v1/pets/{id}',
  sqlitePost: 'SQLite: POST /v1/pets',
  sqliteMix: `SQLite ${MIX_PETS / 1000}k: realistic mix, 1,000 keys`,
  pgList: 'PostgreSQL+Redis 1k: GET /v1/pets?limit=20',
  pgList1m: 'PostgreSQL+Redis 1M: GET /v1/pets?limit=20',
  pgGet: 'PostgreSQL+Redis 1k: GET /v1/pets/{id}',
  pgPost: 'PostgreSQL+Redis: POST /v1/pets',
  pgMix: `PostgreSQL+Redis ${MIX_PETS / 1000}k: realistic mix, 1,000 keys`,
};

const LIST = '/v1/pets?limit=20';
const SOLD = '/v1/pets?status=sold&limit=20';
const DEEP = (d: Dataset) => `/v1/pets?limit=20&cursor=${d.deepCursor}`;
const NEW_PET = '{"name":"Benchmark","categoryId":9223372036854775807}';

function scenarios(withPostgres: boolean): Scenario[] {
  const list: Scenario[] = [
    { label: L.ceiling, server: 'ceiling', path: '/' },
    { label: L.floor, server: 'floor', path: '/' },
    ...(process.env.BENCH_JSON_SERVER === '1' ? [{ label: 'json-server: GET /pets (20 pets)', server: 'json-server', path: '/pets' }] : []),
    { label: L.sqliteList, server: 'sqlite-1k', path: LIST },
    { label: 'SQLite 1k: GET /v1/pets?status=sold&limit=20', server: 'sqlite-1k', path: SOLD },
    { label: 'SQLite 1k: deep page by cursor', server: 'sqlite-1k', path: DEEP },
    { label: L.sqliteGet, server: 'sqlite-1k', path: '/v1/pets/500' },
    { label: L.sqlitePost, server: 'sqlite-post', path: '/v1/pets', method: 'POST', body: NEW_PET },
    { label: L.sqliteList1m, server: 'sqlite-1m', path: LIST },
    { label: 'SQLite 1M: GET /v1/pets?status=sold&limit=20', server: 'sqlite-1m', path: SOLD },
    { label: 'SQLite 1M: deep page by cursor', server: 'sqlite-1m', path: DEEP },
    { label: L.sqliteNoCache, server: 'sqlite-1k-no-cache', path: LIST },
    { label: 'SQLite 1M, no page cache: GET /v1/pets?limit=20', server: 'sqlite-1m-no-cache', path: LIST },
    { label: 'SQLite 1M, no page cache: deep page by cursor', server: 'sqlite-1m-no-cache', path: DEEP },
    { label: L.sqliteMix, server: 'sqlite-mix', path: '/v1/pets', mix: true },
  ];
  if (withPostgres) {
    list.push(
      { label: L.pgList, server: 'postgres-1k', path: LIST },
      { label: 'PostgreSQL+Redis 1k: GET /v1/pets?status=sold&limit=20', server: 'postgres-1k', path: SOLD },
      { label: 'PostgreSQL+Redis 1k: deep page by cursor', server: 'postgres-1k', path: DEEP },
      { label: L.pgGet, server: 'postgres-1k', path: '/v1/pets/500' },
      { label: L.pgPost, server: 'postgres-post', path: '/v1/pets', method: 'POST', body: NEW_PET },
      { label: L.pgList1m, server: 'postgres-1m', path: LIST },
      { label: 'PostgreSQL+Redis 1M: deep page by cursor', server: 'postgres-1m', path: DEEP },
      { label: 'PostgreSQL+Redis 1k, no page cache: GET /v1/pets?limit=20', server: 'postgres-1k-no-cache', path: LIST },
      { label: 'PostgreSQL+Redis 1M, no page cache: deep page by cursor', server: 'postgres-1m-no-cache', path: DEEP },
      { label: L.pgMix, server: 'postgres-mix', path: '/v1/pets', mix: true },
    );
  }
  const chosen = list.filter(
    (s) => (!ONLY || REFERENCES.has(s.server) || ONLY.test(s.label)) && !(GUARD !== undefined && s.server === 'floor'),
  );
  // In an A/B run each service scenario runs on a second process started the other way, in the same rounds,
  // right after A's run (and before it in the reversed rounds), so that both meet the machine alike.
  return chosen.flatMap((s) =>
    REFERENCES.has(s.server) ? [s] : [s, ...OTHERS.map((v) => ({ ...s, label: s.label + labelOf(v), server: s.server + serverOf(v) }))],
  );
}

/** The servers that are not the service. */
const REFERENCES = new Set(['ceiling', 'floor', 'json-server']);

/** How each server starts; only those some chosen scenario names are started. */
function serverStarts(body: string, mixRuns: number, partsPerRun: number): Record<string, () => Promise<Server>> {
  // Read-only data is shared by the A and B processes; data they write (creates, the mix's keys) is not.
  const sqlite1k = once(() => sqliteDataset('small', 1_000, PET_STATUSES));
  const sqlite1m = once(() => sqliteDataset('large', 1_000_000, PET_STATUSES));
  const pg1k = once(() => postgresDataset('small', 1_000, PET_STATUSES));
  const pg1m = once(() => postgresDataset('large', 1_000_000, PET_STATUSES));
  const services = (v: Variant): Record<string, () => Promise<Server>> => {
    // The page cache off on both engines, in the variables of the build that runs (a reference may be older).
    const noCache = pageCacheOff(v.checkout ?? '.');
    const name = (n: string) => n + serverOf(v);
    const own = (n: string) => (v === A ? n : `${n}_${v.letter.toLowerCase()}`);
    return {
      'sqlite-1k': async () => startService(name('sqlite-1k'), v, await sqlite1k(), false),
      'sqlite-1m': async () => startService(name('sqlite-1m'), v, await sqlite1m(), false),
      'sqlite-post': async () => startService(name('sqlite-post'), v, await sqliteDataset(own('post'), 1_000, PET_STATUSES), false),
      // The same data without the finished-page cache, to show what the cache is worth in this run.
      'sqlite-1k-no-cache': async () => startService(name('sqlite-1k-no-cache'), v, await sqlite1k(), false, noCache),
      'sqlite-1m-no-cache': async () => startService(name('sqlite-1m-no-cache'), v, await sqlite1m(), false, noCache),
      'sqlite-mix': async () =>
        startService(name('sqlite-mix'), v, await sqliteDataset(own('mix'), MIX_PETS, MIX_STATUS_PATTERN, mixRuns, partsPerRun), false),
      'postgres-1k': async () => startService(name('postgres-1k'), v, await pg1k(), true),
      'postgres-1m': async () => startService(name('postgres-1m'), v, await pg1m(), true),
      'postgres-post': async () => startService(name('postgres-post'), v, await postgresDataset(own('post'), 1_000, PET_STATUSES), true),
      'postgres-1k-no-cache': async () => startService(name('postgres-1k-no-cache'), v, await pg1k(), true, noCache),
      'postgres-1m-no-cache': async () => startService(name('postgres-1m-no-cache'), v, await pg1m(), true, noCache),
      'postgres-mix': async () =>
        startService(name('postgres-mix'), v, await postgresDataset(own('mix'), MIX_PETS, MIX_STATUS_PATTERN, mixRuns, partsPerRun), true),
    };
  };
  const others = OTHERS.flatMap((v) => Object.entries(services(v)).map(([k, start]) => [k + serverOf(v), start] as const));
  return {
    ceiling: () => startReference('ceiling', (port) => ['bench/ceiling.mjs', String(port), body], '/'),
    floor: () => startReference('floor', (port) => ['bench/fastify-floor.mjs', String(port), body], '/'),
    'json-server': () => {
      // A reference, not a dependency of the project: installed on first use outside the checkout.
      const cli = join(referencePackage('json-server', '0.17.4'), 'lib/cli/bin.js');
      const db = join(work, 'db.json');
      writeFileSync(db, JSON.stringify({ pets: firstPage() }));
      return startReference('json-server', (port) => [cli, '--quiet', '--port', String(port), db], '/pets');
    },
    ...services(A),
    ...Object.fromEntries(others),
  };
}

/** The body the service gives for the first page of the 1k and 1M data, which the ceiling and the floor serve. */
function firstPage() {
  return Array.from({ length: 20 }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, categoryId: i + 1, status: PET_STATUSES[(i + 1) % 3] }));
}

/** A scenario ready to run: its server, its wrk script and how many runs it has had. */
interface Ready extends Scenario {
  host: Server;
  url: string;
  script: string;
  /** Runs so far, the warm-up included: the mix gives each run its own limited keys. */
  runs: number;
}

/** Sends the scenario's request once, checks the answer's status and writes its wrk script. */
async function ready(s: Scenario, host: Server, index: number): Promise<Ready> {
  const d = host.dataset;
  const auth: Headers = d ? { Authorization: `Bearer ${d.mix ? d.mix.enterprise[0] : d.key}` } : {};
  const path = typeof s.path === 'function' ? s.path(d!) : s.path;
  const url = host.url + path;
  const extra = typeof s.headers === 'function' ? await s.headers(await fetch(url, { headers: auth })) : (s.headers ?? {});
  const headers: Headers = { ...auth, ...extra, ...(s.body ? { 'Content-Type': 'application/json' } : {}) };
  const method = s.method ?? 'GET';
  const answer = await fetch(url, { method, headers, ...(s.body ? { body: s.body } : {}) });
  await answer.arrayBuffer();
  const expect = s.expect ?? (method === 'POST' ? 201 : 200);
  if (answer.status !== expect) throw new Error(`${s.label}: ${method} ${path} answered ${answer.status}, expected ${expect}`);
  let script = join(import.meta.dirname, 'mix.lua');
  if (!s.mix) {
    script = join(work, `scenario-${index}.lua`);
    const lines = [`wrk.method = ${luaString(method)}`];
    if (s.body) lines.push(`wrk.body = ${luaString(s.body)}`);
    for (const [name, value] of Object.entries(headers)) lines.push(`wrk.headers[${luaString(name)}] = ${luaString(value)}`);
    writeFileSync(script, lines.join('\n') + '\n');
  }
  return { ...s, host, url, script, runs: 0 };
}

// ------------------------------------------------------------------------------------------------
// Measurement

interface Sample {
  rps: number;
  requests: number;
  seconds: number;
  /** Server CPU time per answered request, µs. */
  cpuUs: number;
  /** Clock ticks the server used in the run: the resolution of cpuUs is one tick in this many. */
  ticks: number;
  /** wrk runs it took to reach MIN_TICKS (1 unless other processes kept the server off its core). */
  parts: number;
  /** Server CPU time over the run's wall time: near 1 when the load kept it busy. */
  busy: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: number;
  /** The other servers' CPU time over the run's wall time, on the same core: what idle servers cost. */
  othersBusy: number;
  /** Share of core 0's time taken by the hypervisor for other tenants. */
  steal0: number;
  /** Share of core 0 left idle: the load did not keep the server busy. */
  idle0: number;
  /** Share of core 1 (wrk's, which PostgreSQL and Redis share) that was busy. */
  busy1: number;
  mix?: MixCounts;
}

async function measure(s: Ready, servers: Server[], seconds: number): Promise<Sample> {
  const mine = servers.indexOf(s.host);
  const run = s.runs++;
  let file = '';
  if (s.mix) {
    const d = s.host.dataset!;
    file = join(work, `mix-${s.host.name}-${run}.lua`);
    writeMixData(file, d.mix!, d.cursorSecret, run);
  }
  let ticks = 0;
  let others = 0;
  let parts = 0;
  let last: WrkReport | undefined;
  const total = { requests: 0, seconds: 0, non2xx: 0, socketErrors: 0 };
  const core0 = { total: 0, idle: 0, steal: 0 };
  const core1 = { total: 0, idle: 0, steal: 0 };
  const mixParts: MixCounts[] = [];
  // A server that other processes kept off its core for most of the run used too few clock ticks to
  // measure: the run goes on, up to MAX_PARTS times its length, until it has MIN_TICKS.
  while (parts < MAX_PARTS && (parts === 0 || ticks < MIN_TICKS)) {
    // The previous run's server closes its connections and collects its garbage just after the load
    // stops; that would otherwise land in this run, on the same core.
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const before = servers.map((sv) => cpuTicks(sv.pid));
    const [c0, c1] = [coreTimes(0), coreTimes(1)];
    last = await wrk(s.url, s.script, seconds, CONNECTIONS, s.mix ? [file, String(run * MAX_PARTS + parts + 1)] : []);
    const after = servers.map((sv) => cpuTicks(sv.pid));
    const [d0, d1] = [coreTimes(0), coreTimes(1)];
    for (const [sum, a, b] of [
      [core0, c0, d0],
      [core1, c1, d1],
    ] as const) {
      for (const k of ['total', 'idle', 'steal'] as const) sum[k] += b[k] - a[k];
    }
    servers.forEach((_, i) => (i === mine ? (ticks += after[i]! - before[i]!) : (others += after[i]! - before[i]!)));
    total.requests += last.requests;
    total.seconds += last.seconds;
    total.non2xx += last.non2xx;
    total.socketErrors += last.socketErrors;
    if (s.mix) mixParts.push(parseMixCounts(last.extra));
    parts++;
  }
  const wall = total.seconds * CLK_TCK;
  const core = (t: CoreTimes, k: 'idle' | 'steal') => t[k] / Math.max(1, t.total);
  return {
    rps: total.requests / total.seconds,
    requests: total.requests,
    seconds: total.seconds,
    cpuUs: ((ticks / CLK_TCK) * 1e6) / Math.max(1, total.requests),
    ticks,
    parts,
    busy: ticks / wall,
    // Latency of the last part: a starved first part tells only how long the server was kept waiting.
    p50Ms: last!.p50Ms,
    p99Ms: last!.p99Ms,
    non2xx: total.non2xx,
    socketErrors: total.socketErrors,
    othersBusy: others / wall,
    steal0: core(core0, 'steal'),
    idle0: core(core0, 'idle'),
    busy1: 1 - core(core1, 'idle'),
    ...(s.mix ? { mix: mergeMixCounts(mixParts) } : {}),
  };
}

// ------------------------------------------------------------------------------------------------
// Report

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
function median(xs: number[]): number {
  const s = sorted(xs);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
const spreadOf = (xs: number[]) => ({ min: Math.min(...xs), median: median(xs), max: Math.max(...xs) });

interface Row {
  label: string;
  service: boolean;
  server: string;
  rps: number;
  rpsRatio: number;
  cpuUs: { min: number; median: number; max: number };
  cpuRatio: { min: number; median: number; max: number };
  /** Rounds whose CPU time could be measured, for this scenario and the ceiling. */
  cpuRounds: number;
  p50Ms: number;
  p99Ms: number;
  busy: number;
  idle0: number;
  busy1: number;
  rssMiB: number;
  idleRssMiB: number;
  non2xx: number;
  refused429?: number;
  socketErrors: number;
  samples: Sample[];
}

function rowOf(s: Ready, samples: Sample[], ceiling: Sample[], rssMiB: number): Row {
  const mix429 = samples.every((x) => x.mix) ? samples.reduce((a, x) => a + (x.mix!.statuses.get(429) ?? 0), 0) : undefined;
  // A round counts for CPU only when both this run and the ceiling's have enough ticks to be measured.
  const rounds = samples.flatMap((x, i) => (x.ticks >= MIN_TICKS && ceiling[i]!.ticks >= MIN_TICKS ? [{ x, c: ceiling[i]! }] : []));
  const none = { min: NaN, median: NaN, max: NaN };
  return {
    label: s.label,
    service: s.host.service,
    server: s.host.name,
    rps: median(samples.map((x) => x.rps)),
    rpsRatio: median(samples.map((x, i) => x.rps / ceiling[i]!.rps)),
    cpuUs: rounds.length ? spreadOf(rounds.map((r) => r.x.cpuUs)) : none,
    // Per round: the ceiling's CPU per request from the same round.
    cpuRatio: rounds.length ? spreadOf(rounds.map((r) => r.c.cpuUs / r.x.cpuUs)) : none,
    cpuRounds: rounds.length,
    p50Ms: median(samples.map((x) => x.p50Ms)),
    p99Ms: median(samples.map((x) => x.p99Ms)),
    busy: median(samples.map((x) => x.busy)),
    idle0: median(samples.map((x) => x.idle0)),
    busy1: median(samples.map((x) => x.busy1)),
    rssMiB,
    idleRssMiB: s.host.idleRssMiB ?? NaN,
    non2xx: samples.reduce((a, x) => a + x.non2xx, 0),
    ...(mix429 === undefined ? {} : { refused429: mix429 }),
    socketErrors: samples.reduce((a, x) => a + x.socketErrors, 0),
    samples,
  };
}

const f2 = (v: number) => v.toFixed(2);
const pct = (v: number) => `${(100 * v).toFixed(0)} %`;
const int = (v: number) => Math.round(v).toLocaleString('en-US');

function scenarioTable(rows: Row[]): string[] {
  return [
    '| Scenario | CPU µs/req | CPU ratio min / median / max | req/s | req/s × ceiling | p50 ms | p99 ms | server CPU | core 0 idle | core 1 busy | idle RSS MiB | peak RSS MiB | non-2xx | 429 | socket errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map((r) =>
      [
        '',
        r.label,
        r.cpuRounds ? r.cpuUs.median.toFixed(1) : '–',
        r.cpuRounds
          ? `${f2(r.cpuRatio.min)} / **${f2(r.cpuRatio.median)}** / ${f2(r.cpuRatio.max)}` +
            (r.cpuRounds < r.samples.length ? ` (${r.cpuRounds} of ${r.samples.length} rounds)` : '')
          : `no round with ${MIN_TICKS} ticks`,
        int(r.rps),
        f2(r.rpsRatio),
        f2(r.p50Ms),
        f2(r.p99Ms),
        pct(r.busy),
        pct(r.idle0),
        pct(r.busy1),
        r.idleRssMiB.toFixed(0),
        r.rssMiB.toFixed(0),
        r.non2xx,
        r.refused429 ?? '–',
        r.socketErrors,
        '',
      ]
        .join(' | ')
        .trim(),
    ),
  ];
}

interface BudgetLine {
  line: string;
  measured: string;
  met: boolean | undefined;
}

/** The variant of a service row, by its label's suffix. */
const letterOf = (r: Row) => /\[([B-Z])\]$/.exec(r.label)?.[1] ?? 'A';

/** The budget of the service started as `npm start` does, or as another variant of BENCH_AB. */
function budget(all: Row[], variant: Variant = A): BudgetLine[] {
  const suffix = labelOf(variant);
  const ceiling = all.find((r) => r.label === L.ceiling);
  const rows = all.filter((r) => !r.service || letterOf(r) === variant.letter);
  const get = (label: string) => rows.find((r) => r.label === label + suffix);
  const lines: BudgetLine[] = [];
  const notMeasured = (line: string) => lines.push({ line, measured: 'not measured', met: undefined });
  const ratio = (line: string, label: string, least: number) => {
    const r = get(label);
    if (!r) return notMeasured(line);
    if (!r.cpuRounds) return lines.push({ line, measured: `not measured: no round with ${MIN_TICKS} clock ticks`, met: undefined });
    lines.push({
      line,
      measured: `${f2(r.cpuRatio.median)} (${f2(r.cpuRatio.min)}–${f2(r.cpuRatio.max)})`,
      met: r.cpuRatio.median >= least,
    });
  };
  ratio('cached SQLite list (SQLite 1k: GET /v1/pets?limit=20), CPU ratio ≥ 0.50', L.sqliteList, 0.5);
  ratio('SQLite list without the page cache (1k), CPU ratio ≥ 0.25', L.sqliteNoCache, 0.25);
  ratio('getPet on SQLite, CPU ratio ≥ 0.45', L.sqliteGet, 0.45);
  ratio('getPet on PostgreSQL + Redis, CPU ratio ≥ 0.30', L.pgGet, 0.3);
  ratio('POST on SQLite, CPU ratio ≥ 0.35', L.sqlitePost, 0.35);
  ratio('POST on PostgreSQL + Redis, CPU ratio ≥ 0.15', L.pgPost, 0.15);
  ratio('PostgreSQL + Redis list (cached 1k first page), CPU ratio ≥ 0.35', L.pgList, 0.35);
  ratio('realistic mix on SQLite, CPU ratio ≥ 0.30', L.sqliteMix, 0.3);
  ratio('realistic mix on PostgreSQL + Redis, CPU ratio ≥ 0.20', L.pgMix, 0.2);
  const services = rows.filter((r) => r.service);
  if (services.length) {
    const peak = services.reduce((a, r) => (r.rssMiB > a.rssMiB ? r : a));
    lines.push({
      line: 'peak RSS (max VmHWM over service processes) < 120 MiB',
      measured: `${peak.rssMiB.toFixed(1)} MiB (${peak.server}); the ceiling's ${ceiling ? ceiling.rssMiB.toFixed(1) : '–'} MiB`,
      met: peak.rssMiB < 120,
    });
  } else notMeasured('peak RSS (max VmHWM over service processes) < 120 MiB');
  for (const [engine, at1k, at1m] of [
    ['SQLite', L.sqliteList, L.sqliteList1m],
    ['PostgreSQL + Redis', L.pgList, L.pgList1m],
  ] as const) {
    const line = `${engine}: list p99 at 1M ≤ 1.2 × p99 at 1k`;
    const [a, b] = [get(at1k), get(at1m)];
    if (!a || !b) notMeasured(line);
    else lines.push({ line, measured: `${f2(b.p99Ms / a.p99Ms)} × (${f2(b.p99Ms)} / ${f2(a.p99Ms)} ms)`, met: b.p99Ms / a.p99Ms <= 1.2 });
  }
  const non2xx = services.reduce((a, r) => a + r.non2xx, 0);
  const socket = services.reduce((a, r) => a + r.socketErrors, 0);
  if (services.length) {
    lines.push({
      line: 'no unexpected non-2xx answers under load',
      measured: `${non2xx}${socket ? ` (and ${socket} socket errors)` : ''}`,
      met: non2xx === 0,
    });
  } else notMeasured('no unexpected non-2xx answers under load');
  return lines;
}

function budgetTable(title: string, lines: BudgetLine[]): string[] {
  return [
    `| ${title} (medians over rounds) | Measured | Met |`,
    '|---|---:|---|',
    ...lines.map((b) => `| ${b.line} | ${b.measured} | ${b.met === undefined ? 'not measured' : b.met ? 'yes' : 'NO'} |`),
    '',
  ];
}

/** B's CPU per request over A's, round by round, over the rounds both could be measured in. */
function pairedRatios(a: Row, b: Row): number[] {
  return a.samples.flatMap((x, i) => {
    const y = b.samples[i]!;
    return x.ticks >= MIN_TICKS && y.ticks >= MIN_TICKS ? [y.cpuUs / x.cpuUs] : [];
  });
}

/** Each service row of A with its row in variant v. */
function pairs(rows: Row[], v: Variant): { a: Row; b: Row }[] {
  return rows
    .filter((r) => r.service && letterOf(r) === 'A')
    .flatMap((a) => {
      const b = rows.find((r) => r.label === a.label + labelOf(v));
      return b ? [{ a, b }] : [];
    });
}

/**
 * A against B, scenario by scenario: B's CPU per request over A's, paired round by round (below 1, B
 * costs less), and both processes' resident memory at start and at their peak, beside the ceiling's.
 */
function abTable(rows: Row[], v: Variant): string[] {
  const ceiling = rows.find((r) => r.label === L.ceiling)!;
  const B = v.letter;
  const out = [
    `A/${B} in one run, rounds alternating: ${describeVariant(A)}; ${describeVariant(v)}. ` +
      `The ceiling's RSS: ${ceiling.idleRssMiB.toFixed(1)} MiB at start, ${ceiling.rssMiB.toFixed(1)} MiB at its peak.`,
    '',
    `| Scenario | CPU µs/req A | ${B} | ${B} / A per round, min / median / max | ratio to the ceiling A | ${B} | idle RSS MiB A | ${B} | peak RSS MiB A | ${B} |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const { a, b } of pairs(rows, v)) {
    const paired = pairedRatios(a, b);
    const ab = paired.length ? spreadOf(paired) : undefined;
    out.push(
      `| ${a.label} | ${a.cpuUs.median.toFixed(1)} | ${b.cpuUs.median.toFixed(1)} | ` +
        `${ab ? `${f2(ab.min)} / **${f2(ab.median)}** / ${f2(ab.max)}` : '–'} | ${f2(a.cpuRatio.median)} | ${f2(b.cpuRatio.median)} | ` +
        `${a.idleRssMiB.toFixed(0)} | ${b.idleRssMiB.toFixed(0)} | ${a.rssMiB.toFixed(0)} | ${b.rssMiB.toFixed(0)} |`,
    );
  }
  return [...out, ''];
}

/** One request's verdict, as bench/last-guard.json holds it for bench/guard.ts. */
export interface GuardLine {
  label: string;
  /** A's CPU per request over B's (this build over the reference), per round: min / median / max. */
  ratio: { min: number; median: number; max: number } | undefined;
  failed: boolean;
}

/** The guard's verdict per scenario: this build (A) over the reference (B), failing above GUARD or when not measured. */
function guardLines(rows: Row[], limit: number): GuardLine[] {
  return pairs(rows, OTHERS[0]!).map(({ a, b }) => {
    const paired = pairedRatios(a, b).map((ba) => 1 / ba);
    const ratio = paired.length ? spreadOf(paired) : undefined;
    return { label: a.label, ratio, failed: ratio === undefined || ratio.median > limit };
  });
}

function guardTable(lines: GuardLine[], limit: number): string[] {
  return [
    `| CPU guard: this build over the reference, per round (fails above ${f2(limit)}) | min / median / max | Passed |`,
    '|---|---:|---|',
    ...lines.map(
      (g) =>
        `| ${g.label} | ${g.ratio ? `${f2(g.ratio.min)} / **${f2(g.ratio.median)}** / ${f2(g.ratio.max)}` : 'not measured'} | ${g.failed ? 'NO' : 'yes'} |`,
    ),
    '',
  ];
}

/** What to know before trusting the figures: resolution, noise, saturation, the mix's make-up. */
function notes(rows: Row[]): string[] {
  const all = rows.flatMap((r) => r.samples);
  const out: string[] = [];
  const enough = all.filter((x) => x.ticks >= MIN_TICKS);
  const fewest = Math.min(...enough.map((x) => x.ticks));
  out.push(
    `CPU time resolution: one clock tick in at least ${fewest} in the runs used (${(100 / fewest).toFixed(2)} % at worst); ` +
      `${all.filter((x) => x.parts > 1).length} of ${all.length} runs were extended (up to ${MAX_PARTS} × ${SECONDS} s) because ` +
      `other processes kept the server off its core; ${all.length - enough.length} still had under ${MIN_TICKS} ticks: no CPU ratio from those.`,
  );
  const steal = all.map((x) => x.steal0);
  out.push(`Core 0 time stolen by the hypervisor: median ${pct(median(steal))}, worst run ${pct(Math.max(...steal))}.`);
  out.push(`Idle servers' CPU on core 0 during another's run: at most ${pct(Math.max(...all.map((x) => x.othersBusy)))} of the core.`);
  // Below 90 % of the core, either the core sat idle (the load did not keep the server busy: it waited on
  // the database, or on wrk, whose core PostgreSQL and Redis share) or other processes had it.
  const starved = rows.filter((r) => r.busy < 0.9);
  const waiting = starved
    .filter((r) => r.idle0 >= 0.1)
    .map((r) => `${r.label} (${pct(r.busy)}, core 0 idle ${pct(r.idle0)}, core 1 ${pct(r.busy1)})`);
  const shared = starved.filter((r) => r.idle0 < 0.1).map((r) => `${r.label} (${pct(r.busy)})`);
  if (waiting.length) out.push(`Server under 90 % of its core with core 0 idle, so the load did not keep it busy: ${waiting.join('; ')}.`);
  if (shared.length) {
    out.push(
      `Server under 90 % of its core with core 0 busy: other processes, or the kernel's network work (softirq, charged to ` +
        `no process), took the rest: ${shared.join('; ')}.`,
    );
  }
  const unstable = rows
    .filter((r) => (r.cpuUs.max - r.cpuUs.min) / r.cpuUs.median > 0.1)
    .map((r) => `${r.label} (${r.cpuUs.min.toFixed(1)}–${r.cpuUs.max.toFixed(1)} µs)`);
  if (unstable.length) out.push(`CPU per request varied by more than 10 % over rounds: ${unstable.join('; ')}.`);
  for (const r of rows.filter((x) => x.samples.some((s) => s.mix))) {
    const kinds = new Map<string, number>();
    const statuses = new Map<number, number>();
    let unmatched = 0;
    let ended = 0;
    for (const s of r.samples) {
      s.mix!.kinds.forEach((n, k) => kinds.set(k, (kinds.get(k) ?? 0) + n));
      s.mix!.statuses.forEach((n, k) => statuses.set(k, (statuses.get(k) ?? 0) + n));
      unmatched += s.mix!.unmatched;
      ended += s.mix!.walksEnded;
    }
    const total = [...kinds.values()].reduce((a, n) => a + n, 0);
    const made = ['list', 'get', 'create'].map((k) => `${k} ${pct((kinds.get(k) ?? 0) / Math.max(1, total))}`).join(', ');
    const codes = [...statuses]
      .sort(([a], [b]) => a - b)
      .map(([code, n]) => `${code}: ${int(n)}`)
      .join(', ');
    out.push(
      `${r.label}: answers ${made}; by status ${codes}; ${int(ended)} walks reached the last page; ${unmatched} answers not matched to a client.`,
    );
  }
  return out.map((l) => `- ${l}`);
}

function commit(): string {
  const git = (...args: string[]) => execFileSync('git', args).toString().trim();
  try {
    return git('rev-parse', '--short', 'HEAD') + (git('status', '--porcelain') ? '+dirty' : '');
  } catch {
    return 'unknown';
  }
}

// ------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  execFileSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit' });
  if (OTHERS[0]?.checkout) execFileSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit', cwd: OTHERS[0].checkout });
  const withPostgres = await postgresReachable();
  if (!withPostgres) console.log('PostgreSQL or Redis not reachable (or BENCH_SKIP_POSTGRES=1): their rows are left out.');
  const chosen = scenarios(withPostgres);

  const body = join(work, 'body.json');
  writeFileSync(body, JSON.stringify(firstPage()));
  console.log(`Preparing data in ${work} and starting servers ...`);
  const starts = serverStarts(body, ROUNDS + 1, MAX_PARTS);
  const servers = new Map<string, Server>();
  for (const name of new Set(chosen.map((s) => s.server))) servers.set(name, await starts[name]!());
  const all = [...servers.values()];
  const runs: Ready[] = [];
  for (const [i, s] of chosen.entries()) runs.push(await ready(s, servers.get(s.server)!, i));

  const heading = `Run of ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${commit()}`;
  const machine =
    `Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Linux ${release()}; ` +
    `Node ${process.version}; ${ROUNDS} alternating rounds × ${SECONDS} s after a warm-up of ${WARMUP_SECONDS} s ` +
    `(${MIX_WARMUP_SECONDS} s for the mixes); ` +
    `wrk 1 thread × ${CONNECTIONS} connections on core 1, servers on core 0; ${idlePolling.description}; ` +
    `CPU time from /proc at ${CLK_TCK} ticks/s.`;
  console.log(`\n${heading}\n${machine}\n`);

  const line = (round: string, s: Ready, x: Sample) =>
    console.log(
      `${round.padEnd(9)} ${s.label.slice(0, 58).padEnd(58)} ${x.cpuUs.toFixed(1).padStart(7)} µs/req ${int(x.rps).padStart(7)} req/s  ` +
        `server ${pct(x.busy).padStart(5)}  core 0 idle ${pct(x.idle0).padStart(5)}  core 1 ${pct(x.busy1).padStart(5)}` +
        (x.othersBusy >= 0.02 ? `  idle servers ${pct(x.othersBusy)}` : '') +
        (x.parts > 1 ? `  ${x.parts} parts, ${x.ticks} ticks` : '') +
        (x.non2xx ? `  non-2xx ${x.non2xx}` : ''),
    );
  for (const s of runs) line('warm-up', s, await measure(s, all, s.mix ? MIX_WARMUP_SECONDS : WARMUP_SECONDS));
  const samples = new Map<Ready, Sample[]>(runs.map((s) => [s, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of round % 2 === 0 ? runs : [...runs].reverse()) {
      const x = await measure(s, all, SECONDS);
      samples.get(s)!.push(x);
      line(`${round + 1}/${ROUNDS}`, s, x);
    }
  }

  const rss = new Map(all.map((s) => [s, peakRssMiB(s.pid)]));
  const ceiling = samples.get(runs[0]!)!;
  const rows = runs.map((s) => rowOf(s, samples.get(s)!, ceiling, rss.get(s.host)!));
  const budgetLines = budget(rows);
  const minutes = (Date.now() - started) / 60_000;
  const report = [
    `## ${heading}`,
    '',
    machine,
    `Ratio = the ceiling's CPU time per request over the scenario's, per round (1.0 = the ceiling; higher is better); ` +
      `other columns are medians over rounds; non-2xx, 429 and socket errors are totals over the measured rounds.`,
    '',
    ...scenarioTable(rows),
    '',
    ...budgetTable(OTHERS.length ? `Budget, ${describeVariant(A)}` : 'Budget', budgetLines),
    ...OTHERS.flatMap((v) => [...budgetTable(`Budget, ${describeVariant(v)}`, budget(rows, v)), ...abTable(rows, v)]),
    ...notes(rows),
    `- Run time: ${Math.floor(minutes)} min ${Math.round((minutes % 1) * 60)} s.`,
  ];
  const guard = GUARD === undefined ? undefined : guardLines(rows, GUARD);
  if (guard) report.push('', ...guardTable(guard, GUARD!));
  console.log('\n' + report.join('\n'));
  writeFileSync(join(import.meta.dirname, 'last-run.md'), report.join('\n') + '\n');
  console.log('\nWritten to bench/last-run.md.');
  if (guard) {
    writeFileSync(join(import.meta.dirname, 'last-guard.json'), JSON.stringify(guard, null, 2) + '\n');
    return guard.some((g) => g.failed) ? 1 : 0;
  }
  const missed = budgetLines.filter((b) => b.met === false).length;
  return missed && process.env.BENCH_STRICT === '1' ? 1 : 0;
}

// On failure too: the servers, databases, Redis keys and files go before the error is reported.
const status = await main().finally(cleanUp);
process.exit(status);
