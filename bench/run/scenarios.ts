/** What is measured: each scenario's request and the server that answers it, and how each server starts. */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PET_STATUSES } from '../../src/domain/pet.ts';
import { pageCacheOff } from '../cache-switches.ts';
import { MIX_PETS, MIX_STATUS_PATTERN } from '../mix.ts';
import { referencePackage } from '../reference-packages.ts';
import { luaString } from '../wrk.ts';
import { once, postgresDataset, sqliteDataset, type Dataset } from './datasets.ts';
import { startReference, startService, type Server } from './servers.ts';
import { work } from './session.ts';
import { A, GUARD, ONLY, OTHERS, labelOf, serverOf, type Variant } from './settings.ts';

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

export const L = {
  ceiling: 'ceiling: node:http, 20 pets from memory',
  floor: 'floor: bare Fastify route, 20 pets pre-serialised',
  sqliteList: 'SQLite 1k: GET /v1/pets?limit=20',
  sqliteList1m: 'SQLite 1M: GET /v1/pets?limit=20',
  sqliteNoCache: 'SQLite 1k, no page cache: GET /v1/pets?limit=20',
  sqliteGet: 'SQLite 1k: GET /v1/pets/{id}',
  sqlitePost: 'SQLite: POST /v1/pets',
  workersList: 'SQLite 1k, 2 workers: GET /v1/pets?limit=20',
  workersGet: 'SQLite 1k, 2 workers: GET /v1/pets/{id}',
  workersPost: 'SQLite, 2 workers: POST /v1/pets',
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

export function scenarios(withPostgres: boolean): Scenario[] {
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
    { label: L.workersList, server: 'sqlite-1k-w2', path: LIST },
    { label: L.workersGet, server: 'sqlite-1k-w2', path: '/v1/pets/500' },
    { label: L.workersPost, server: 'sqlite-post-w2', path: '/v1/pets', method: 'POST', body: NEW_PET },
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
export function serverStarts(body: string, mixRuns: number, partsPerRun: number): Record<string, () => Promise<Server>> {
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
      'sqlite-1k-w2': async () => startService(name('sqlite-1k-w2'), v, await sqlite1k(), false, {}, 2),
      'sqlite-post-w2': async () =>
        startService(name('sqlite-post-w2'), v, await sqliteDataset(own('post_w2'), 1_000, PET_STATUSES), false, {}, 2),
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
export function firstPage() {
  return Array.from({ length: 20 }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, categoryId: i + 1, status: PET_STATUSES[(i + 1) % 3] }));
}

/** A scenario ready to run: its server, its wrk script and how many runs it has had. */
export interface Ready extends Scenario {
  host: Server;
  url: string;
  script: string;
  /** Runs so far, the warm-up included: the mix gives each run its own limited keys. */
  runs: number;
}

/** Sends the scenario's request once, checks the answer's status and writes its wrk script. */
export async function ready(s: Scenario, host: Server, index: number): Promise<Ready> {
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
