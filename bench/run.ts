/**
 * `npm run bench`: requests per second, p50 and p99 latency and peak memory of the service next to a
 * bare node:http ceiling and json-server, all measured in one run, as ratios to the ceiling.
 *
 * Each server is pinned to core 0 and wrk to core 1. Every scenario runs once per round; rounds
 * alternate the order, and the reported figure is the median over rounds. The service runs as
 * built (`node dist/cli/main.js serve`), authenticated with an Enterprise key whose limits no run
 * reaches (so the limiter is exercised, never refusing), with LOG_LEVEL=warn (no per-request lines).
 *
 * Environment: BENCH_ROUNDS (3), BENCH_SECONDS (5), BENCH_CONNECTIONS (64), BENCH_POSTGRES_URL
 * (postgres://postgres@127.0.0.1:5432/postgres), BENCH_REDIS_URL (redis://127.0.0.1:6379),
 * BENCH_SKIP_POSTGRES=1 to leave PostgreSQL + Redis out, BENCH_ONLY=<regex> to run only the scenarios
 * whose label matches (the ceiling always runs), for quick comparisons while working.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createKey } from '../src/cli/keys.ts';
import { CursorCodec } from '../src/domain/cursor.ts';
import { PET_STATUSES } from '../src/domain/pet.ts';
import { openPostgresStore } from '../src/storage/postgres/store.ts';
import { DatabaseSync, inWriteTransaction } from '../src/storage/sqlite/driver.ts';
import { openSqliteStore } from '../src/storage/sqlite/store.ts';
import type { Store } from '../src/storage/store.ts';
import { withThisNode } from '../scripts/this-node.ts';
import { referencePackage } from './reference-packages.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const PG_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const work = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
const STATUSES = PET_STATUSES;
let nextPort = 19100;

/** json-server is a reference to measure against, not a dependency of the project. */
const jsonServerCli = () => join(referencePackage('json-server', '0.17.4'), 'lib/cli/bin.js');

// ------------------------------------------------------------------------------------------------
// Data

interface Dataset {
  databaseUrl: string;
  key: string;
  /** A cursor 40 pets before the end: the deepest full page. */
  deepCursor: string;
  drop(): Promise<void>;
}

async function prepare(store: Store, count: number, databaseUrl: string, drop: () => Promise<void>): Promise<Dataset> {
  const { key } = await createKey(store, 'production', { plan: 'enterprise', rpm: '2000000000', rpd: '2000000000' });
  const deepCursor = new CursorCodec(await store.cursorSecret()).encode({ afterId: BigInt(count - 40), status: undefined });
  await store.close();
  return { databaseUrl, key, deepCursor, drop };
}

async function sqliteDataset(name: string, count: number): Promise<Dataset> {
  const path = join(work, `${name}.db`);
  openSqliteStore({ path, synchronous: 'normal' }).close(); // creates and migrates
  const db = new DatabaseSync(path);
  const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)');
  inWriteTransaction(db, () => {
    for (let i = 1; i <= count; i++) insert.run(`pet ${i}`, i, STATUSES[i % 3]!);
  });
  db.close();
  return prepare(openSqliteStore({ path, synchronous: 'normal' }), count, `sqlite:${path}`, async () => undefined);
}

async function postgresDataset(name: string, count: number): Promise<Dataset> {
  const dbName = `petstore_bench_${name}_${process.pid}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const url = new URL(PG_URL);
  url.pathname = `/${dbName}`;
  const store = await openPostgresStore({ url: url.toString() });
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  await client.query(
    `INSERT INTO pets (name, category_id, status)
     SELECT 'pet ' || g, g, ($2::text[])[1 + g % 3] FROM generate_series(1, $1) g`,
    [count, STATUSES],
  );
  await client.query('VACUUM ANALYZE pets');
  await client.end();
  const drop = async () => {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await c.end();
  };
  return prepare(store, count, url.toString(), drop);
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

// ------------------------------------------------------------------------------------------------
// Servers

interface Server {
  name: string;
  url: string;
  child: ChildProcess;
}

async function startPinned(name: string, command: string, args: string[], env: Record<string, string>, readyUrl: string): Promise<Server> {
  const child = spawn('taskset', ['-c', '0', command, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
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
  return { name, url: new URL(readyUrl).origin, child };
}

async function startService(name: string, dataset: Dataset, redis: boolean, extra: Record<string, string> = {}): Promise<Server> {
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
  if (redis) Object.assign(env, { REDIS_URL, REDIS_KEY_PREFIX: `petstore-bench-${process.pid}-${port}` });
  // Run as `npm start` runs it: the built command, with the Node.js flags its first line names, on this Node.js.
  return startPinned(name, 'dist/cli/main.js', ['serve'], withThisNode(env), `http://127.0.0.1:${port}/healthz`);
}

/** Peak resident memory of a process (VmHWM), in MiB. */
function peakRssMiB(pid: number): number {
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return kb / 1024;
}

// ------------------------------------------------------------------------------------------------
// Load

interface Scenario {
  label: string;
  server: Server;
  path: string;
  key?: string;
  post?: boolean;
}

interface Sample {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
}

function luaFor(s: Scenario): string {
  const file = join(work, `${s.label.replace(/\W+/g, '_')}.lua`);
  const lines = [];
  if (s.key) lines.push(`wrk.headers["Authorization"] = "Bearer ${s.key}"`);
  if (s.post) {
    lines.push('wrk.method = "POST"', `wrk.body = '{"name":"Benchmark","categoryId":9223372036854775807}'`);
    lines.push('wrk.headers["Content-Type"] = "application/json"');
  }
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

const toMs = (value: string, unit: string) => Number(value) * ({ us: 0.001, ms: 1, s: 1000 } as Record<string, number>)[unit]!;

function wrk(s: Scenario, seconds: number): Sample {
  const out = execFileSync('taskset', [
    '-c',
    '1',
    'wrk',
    '-t1',
    `-c${CONNECTIONS}`,
    `-d${seconds}s`,
    '--latency',
    '-s',
    luaFor(s),
    s.server.url + s.path,
  ]).toString();
  const latency = (pct: string) => {
    const m = new RegExp(`^\\s+${pct}%\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(out)!;
    return toMs(m[1]!, m[2]!);
  };
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1]),
    p50: latency('50'),
    p99: latency('99'),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// ------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  execFileSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit' });
  console.log(`Preparing data in ${work} ...`);
  const withPostgres = await postgresReachable();
  const data = {
    sqlite1k: await sqliteDataset('small', 1_000),
    sqlite1m: await sqliteDataset('large', 1_000_000),
    sqlitePost: await sqliteDataset('post', 1_000),
    ...(withPostgres
      ? {
          pg1k: await postgresDataset('small', 1_000),
          pg1m: await postgresDataset('large', 1_000_000),
          pgPost: await postgresDataset('post', 1_000),
        }
      : {}),
  };

  // The ceiling and json-server serve the same body the service gives for the first page.
  const firstPage = JSON.stringify(
    Array.from({ length: 20 }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, categoryId: i + 1, status: STATUSES[(i + 1) % 3] })),
  );
  writeFileSync(join(work, 'body.json'), firstPage);
  writeFileSync(join(work, 'db.json'), JSON.stringify({ pets: JSON.parse(firstPage) }));

  const servers: Server[] = [];
  const track = (s: Server) => (servers.push(s), s);
  const port = () => nextPort++;
  let p = port();
  const ceiling = track(
    await startPinned('ceiling', process.execPath, ['bench/ceiling.mjs', String(p), join(work, 'body.json')], {}, `http://127.0.0.1:${p}/`),
  );
  p = port();
  const jsonServer = track(
    await startPinned(
      'json-server',
      process.execPath,
      [jsonServerCli(), '--quiet', '--port', String(p), join(work, 'db.json')],
      {},
      `http://127.0.0.1:${p}/pets`,
    ),
  );
  const s1k = track(await startService('sqlite-1k', data.sqlite1k, false));
  const s1m = track(await startService('sqlite-1m', data.sqlite1m, false));
  const sPost = track(await startService('sqlite-post', data.sqlitePost, false));
  // The same data without the finished-page cache, to show what the cache is worth in this run.
  const s1kNoCache = track(await startService('sqlite-1k-no-cache', data.sqlite1k, false, { PAGE_CACHE_SIZE: '0' }));
  const s1mNoCache = track(await startService('sqlite-1m-no-cache', data.sqlite1m, false, { PAGE_CACHE_SIZE: '0' }));

  const scenarios: Scenario[] = [
    { label: 'ceiling: node:http, 20 pets from memory', server: ceiling, path: '/' },
    { label: 'json-server: GET /pets (20 pets)', server: jsonServer, path: '/pets' },
    { label: 'SQLite 1k: GET /v1/pets?limit=20', server: s1k, path: '/v1/pets?limit=20', key: data.sqlite1k.key },
    { label: 'SQLite 1k: GET /v1/pets?status=sold&limit=20', server: s1k, path: '/v1/pets?status=sold&limit=20', key: data.sqlite1k.key },
    {
      label: 'SQLite 1k: deep page by cursor',
      server: s1k,
      path: `/v1/pets?limit=20&cursor=${data.sqlite1k.deepCursor}`,
      key: data.sqlite1k.key,
    },
    { label: 'SQLite 1k: GET /v1/pets/{id}', server: s1k, path: '/v1/pets/500', key: data.sqlite1k.key },
    { label: 'SQLite: POST /v1/pets', server: sPost, path: '/v1/pets', key: data.sqlitePost.key, post: true },
    { label: 'SQLite 1M: GET /v1/pets?limit=20', server: s1m, path: '/v1/pets?limit=20', key: data.sqlite1m.key },
    { label: 'SQLite 1M: GET /v1/pets?status=sold&limit=20', server: s1m, path: '/v1/pets?status=sold&limit=20', key: data.sqlite1m.key },
    {
      label: 'SQLite 1M: deep page by cursor',
      server: s1m,
      path: `/v1/pets?limit=20&cursor=${data.sqlite1m.deepCursor}`,
      key: data.sqlite1m.key,
    },
    { label: 'SQLite 1k, no page cache: GET /v1/pets?limit=20', server: s1kNoCache, path: '/v1/pets?limit=20', key: data.sqlite1k.key },
    { label: 'SQLite 1M, no page cache: GET /v1/pets?limit=20', server: s1mNoCache, path: '/v1/pets?limit=20', key: data.sqlite1m.key },
    {
      label: 'SQLite 1M, no page cache: deep page by cursor',
      server: s1mNoCache,
      path: `/v1/pets?limit=20&cursor=${data.sqlite1m.deepCursor}`,
      key: data.sqlite1m.key,
    },
  ];
  if (data.pg1k && data.pg1m && data.pgPost) {
    const g1k = track(await startService('postgres-1k', data.pg1k, true));
    const g1m = track(await startService('postgres-1m', data.pg1m, true));
    const gPost = track(await startService('postgres-post', data.pgPost, true));
    // The same data with every page read fresh, to show what the cache is worth on PostgreSQL.
    const g1kNoCache = track(await startService('postgres-1k-no-cache', data.pg1k, true, { PAGE_CACHE_TTL_MS: '0' }));
    const g1mNoCache = track(await startService('postgres-1m-no-cache', data.pg1m, true, { PAGE_CACHE_TTL_MS: '0' }));
    scenarios.push(
      { label: 'PostgreSQL+Redis 1k: GET /v1/pets?limit=20', server: g1k, path: '/v1/pets?limit=20', key: data.pg1k.key },
      {
        label: 'PostgreSQL+Redis 1k: GET /v1/pets?status=sold&limit=20',
        server: g1k,
        path: '/v1/pets?status=sold&limit=20',
        key: data.pg1k.key,
      },
      {
        label: 'PostgreSQL+Redis 1k: deep page by cursor',
        server: g1k,
        path: `/v1/pets?limit=20&cursor=${data.pg1k.deepCursor}`,
        key: data.pg1k.key,
      },
      { label: 'PostgreSQL+Redis 1k: GET /v1/pets/{id}', server: g1k, path: '/v1/pets/500', key: data.pg1k.key },
      { label: 'PostgreSQL+Redis: POST /v1/pets', server: gPost, path: '/v1/pets', key: data.pgPost.key, post: true },
      { label: 'PostgreSQL+Redis 1M: GET /v1/pets?limit=20', server: g1m, path: '/v1/pets?limit=20', key: data.pg1m.key },
      {
        label: 'PostgreSQL+Redis 1M: deep page by cursor',
        server: g1m,
        path: `/v1/pets?limit=20&cursor=${data.pg1m.deepCursor}`,
        key: data.pg1m.key,
      },
      {
        label: 'PostgreSQL+Redis 1k, no page cache: GET /v1/pets?limit=20',
        server: g1kNoCache,
        path: '/v1/pets?limit=20',
        key: data.pg1k.key,
      },
      {
        label: 'PostgreSQL+Redis 1M, no page cache: deep page by cursor',
        server: g1mNoCache,
        path: `/v1/pets?limit=20&cursor=${data.pg1m.deepCursor}`,
        key: data.pg1m.key,
      },
    );
  } else {
    console.log('PostgreSQL or Redis not reachable (or BENCH_SKIP_POSTGRES=1): their rows are left out.');
  }

  if (process.env.BENCH_ONLY) {
    const only = new RegExp(process.env.BENCH_ONLY);
    scenarios.splice(1, scenarios.length, ...scenarios.slice(1).filter((s) => only.test(s.label)));
  }
  for (const s of scenarios) wrk(s, 1); // warm-up: JIT, caches, connection pools
  const samples = new Map<Scenario, Sample[]>(scenarios.map((s) => [s, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? scenarios : [...scenarios].reverse();
    for (const s of order) {
      samples.get(s)!.push(wrk(s, SECONDS));
      process.stdout.write('.');
    }
  }
  console.log();

  const rss = new Map(servers.map((s) => [s, peakRssMiB(s.child.pid!)]));
  const result = new Map(
    scenarios.map((s) => {
      const xs = samples.get(s)!;
      return [
        s.label,
        {
          rps: median(xs.map((x) => x.rps)),
          p50: median(xs.map((x) => x.p50)),
          p99: median(xs.map((x) => x.p99)),
          non2xx: xs.reduce((a, x) => a + x.non2xx, 0),
          rss: rss.get(s.server)!,
        },
      ];
    }),
  );
  const ceil = result.get(scenarios[0]!.label)!;

  const lines = [
    `Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}; ` +
      `${ROUNDS} alternating rounds × ${SECONDS} s, wrk ${CONNECTIONS} connections; server on core 0, wrk on core 1; medians.`,
    '',
    '| Scenario | req/s | × ceiling | p50 ms | × ceiling | p99 ms | × ceiling | peak RSS MiB | non-2xx |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...[...result].map(
      ([label, r]) =>
        `| ${label} | ${r.rps.toFixed(0)} | ${(r.rps / ceil.rps).toFixed(2)} | ${r.p50.toFixed(2)} | ${(r.p50 / ceil.p50).toFixed(1)} | ${r.p99.toFixed(2)} | ${(r.p99 / ceil.p99).toFixed(1)} | ${r.rss.toFixed(0)} | ${r.non2xx} |`,
    ),
  ];

  const get = (label: string) => result.get(label);
  const budget: [string, boolean | undefined, string][] = [];
  const check = (line: string, value: number | undefined, ok: (v: number) => boolean, fmt: (v: number) => string) =>
    budget.push([line, value === undefined ? undefined : ok(value), value === undefined ? 'not measured' : fmt(value)]);
  const ratio = (a?: { rps: number }, b?: { rps: number }) => (a && b ? a.rps / b.rps : undefined);
  check(
    'SQLite list ≥ 0.40 of the ceiling',
    ratio(get('SQLite 1k: GET /v1/pets?limit=20'), ceil),
    (v) => v >= 0.4,
    (v) => v.toFixed(2),
  );
  check(
    'SQLite POST ≥ 0.15 of the ceiling',
    ratio(get('SQLite: POST /v1/pets'), ceil),
    (v) => v >= 0.15,
    (v) => v.toFixed(2),
  );
  check(
    'PostgreSQL+Redis list ≥ 0.20 of the ceiling',
    ratio(get('PostgreSQL+Redis 1k: GET /v1/pets?limit=20'), ceil),
    (v) => v >= 0.2,
    (v) => v.toFixed(2),
  );
  check(
    'SQLite list ≥ 5 × json-server',
    ratio(get('SQLite 1k: GET /v1/pets?limit=20'), get('json-server: GET /pets (20 pets)')),
    (v) => v >= 5,
    (v) => `${v.toFixed(2)} ×`,
  );
  check(
    'SQLite: 1M deep page ≤ 1.3 × slower than the first page (req/s ratio)',
    ratio(get('SQLite 1M: GET /v1/pets?limit=20'), get('SQLite 1M: deep page by cursor')),
    (v) => v <= 1.3,
    (v) => `${v.toFixed(2)} ×`,
  );
  check(
    'PostgreSQL+Redis: 1M deep page ≤ 1.3 × slower than the first page',
    ratio(get('PostgreSQL+Redis 1M: GET /v1/pets?limit=20'), get('PostgreSQL+Redis 1M: deep page by cursor')),
    (v) => v <= 1.3,
    (v) => `${v.toFixed(2)} ×`,
  );
  for (const [engine, pct] of [
    ['SQLite', 'p50'],
    ['SQLite', 'p99'],
    ['PostgreSQL+Redis', 'p50'],
    ['PostgreSQL+Redis', 'p99'],
  ] as const) {
    const at1m = get(`${engine} 1M: GET /v1/pets?limit=20`)?.[pct];
    const at1k = get(`${engine} 1k: GET /v1/pets?limit=20`)?.[pct];
    check(
      `${engine}: list ${pct} at 1M ≤ 1.3 × ${pct} at 1k`,
      at1m && at1k ? at1m / at1k : undefined,
      (v) => v <= 1.3,
      (v) => `${v.toFixed(2)} ×`,
    );
  }
  const services = [...result].filter(([l]) => /SQLite|PostgreSQL/.test(l));
  check(
    'no non-2xx answers under load',
    services.reduce((a, [, r]) => a + r.non2xx, 0),
    (v) => v === 0,
    String,
  );
  check(
    'peak RSS < 150 MiB',
    Math.max(...services.map(([, r]) => r.rss)),
    (v) => v < 150,
    (v) => `${v.toFixed(1)} MiB`,
  );
  lines.push(
    '',
    '| Budget | Measured | Met |',
    '|---|---:|---|',
    ...budget.map(([l, ok, v]) => `| ${l} | ${v} | ${ok === undefined ? '–' : ok ? 'yes' : 'NO'} |`),
  );

  console.log('\n' + lines.join('\n'));
  writeFileSync('bench/last-run.md', lines.join('\n') + '\n');

  for (const s of servers) s.child.kill('SIGTERM');
  await Promise.all(servers.map((s) => new Promise((r) => (s.child.exitCode !== null ? r(null) : s.child.once('exit', r)))));
  for (const d of Object.values(data)) await d.drop();
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0 });
  if (withPostgres) {
    await redis.connect();
    const keys = await redis.keys(`petstore-bench-${process.pid}-*`);
    if (keys.length) await redis.del(...keys);
  }
  redis.disconnect();
  rmSync(work, { recursive: true, force: true });
}

await main();
