/**
 * `npm run bench:platform`: what the platform gives against the dependency it replaced, measured in
 * one run (docs/platform.md records the decisions). Each figure is the median of ROUNDS rounds, with
 * the lowest and highest; run it pinned to one core (`taskset -c 1 npm run bench:platform`) on a quiet
 * machine. The replaced packages are installed on first use outside the checkout
 * (reference-packages.ts).
 *
 * - JSON request bodies: lossless-json (as the service used it) against JSON.parse, the duplicate-key
 *   check and the source-text reviver (src/http/hooks/json-bodies.ts).
 * - SQLite: better-sqlite3 against node:sqlite, on the store's own statements.
 * - TypeScript: starting the CLI and running two test files through tsx against Node's type stripping.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PET_STATUSES } from '../src/domain/pet.ts';
import { exactInteger, exactTopLevelIntegers, parseJsonBody } from '../src/http/hooks/json-bodies.ts';
import { DatabaseSync, inWriteTransaction } from '../src/storage/sqlite/driver.ts';
import { referencePackage } from './reference-packages.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const load = (dir: string) => createRequire(join(dir, 'package.json'))(dir);

function measure(label: string, iterations: number, work: (i: number) => unknown): void {
  for (let i = 0; i < Math.ceil(iterations / 10); i++) work(i); // warm-up
  const perCall: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) work(i);
    perCall.push(Number(process.hrtime.bigint() - start) / iterations / 1000);
  }
  report(label, perCall, 'µs');
}

function report(label: string, values: number[], unit: string): void {
  const sorted = [...values].sort((a, b) => a - b);
  const f = (v: number) => (v >= 100 ? v.toFixed(0) : v.toFixed(2));
  console.log(`| ${label} | ${f(sorted[Math.floor(sorted.length / 2)]!)} ${unit} | ${f(sorted[0]!)}–${f(sorted.at(-1)!)} |`);
}

const header = (title: string) => console.log(`\n${title}\n\n| case | median | range |\n|---|---|---|`);

// ------------------------------------------------------------------------------------------------
header('JSON request bodies (per body)');
interface LosslessJson {
  parse(text: string): unknown;
  isLosslessNumber(value: unknown): value is { value: string };
}
const lossless = load(referencePackage('lossless-json', '4.3.3')) as LosslessJson;
const toPlain = (value: unknown): unknown => {
  if (lossless.isLosslessNumber(value)) return Number(value.value);
  if (Array.isArray(value)) return value.map(toPlain);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      Object.defineProperty(out, k, { value: toPlain(v), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return value;
};
const viaLosslessJson = (text: string) => {
  const parsed = lossless.parse(text) as Record<string, unknown>;
  const exact = new Map<string, bigint | undefined>();
  for (const [k, v] of Object.entries(parsed)) if (lossless.isLosslessNumber(v)) exact.set(k, exactInteger(v.value));
  return [toPlain(parsed), exact];
};
const request = () => ({ jsonText: undefined }) as unknown as Parameters<typeof parseJsonBody>[0];
const viaPlatform = (text: string) => {
  const req = request();
  return [parseJsonBody(req, text), exactTopLevelIntegers(req.jsonText!)];
};
const newPet = '{"name":"Pickle the third","categoryId":9223372036854775807,"status":"available"}';
const unknownFields = JSON.stringify(Object.fromEntries(Array.from({ length: 4000 }, (_, i) => [`f${i}`, i])));
const nested = JSON.stringify({ name: 'x', categoryId: 5, extra: Array.from({ length: 2700 }, (_, i) => ({ a: i, b: 'yy' })) });
measure('lossless-json: a NewPet (80 B)', 100_000, () => viaLosslessJson(newPet));
measure('JSON.parse + source text: a NewPet (80 B)', 100_000, () => viaPlatform(newPet));
// Refused bodies never reach the reviver: the schema turns them away first.
measure(`lossless-json: 4,000 unknown fields (${Math.round(unknownFields.length / 1000)} KB)`, 200, () => viaLosslessJson(unknownFields));
measure(`JSON.parse: 4,000 unknown fields (${Math.round(unknownFields.length / 1000)} KB)`, 200, () =>
  parseJsonBody(request(), unknownFields),
);
measure(`lossless-json: nested arrays and objects (${Math.round(nested.length / 1000)} KB)`, 200, () => viaLosslessJson(nested));
measure(`JSON.parse: nested arrays and objects (${Math.round(nested.length / 1000)} KB)`, 200, () => parseJsonBody(request(), nested));

// ------------------------------------------------------------------------------------------------
header('SQLite drivers (per statement; WAL, synchronous=NORMAL, int64 columns as bigint)');
interface BetterStatement {
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  safeIntegers(on: boolean): BetterStatement;
}
interface BetterDatabase {
  exec(sql: string): void;
  prepare(sql: string): BetterStatement;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): { immediate(...args: A): R };
  close(): void;
}
const BetterSqlite3 = load(referencePackage('better-sqlite3', '13.2.0')) as new (path: string) => BetterDatabase;
const SCHEMA = `PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
  CREATE TABLE pets (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, category_id INTEGER NOT NULL, status TEXT NOT NULL);
  CREATE INDEX pets_status_id ON pets (status, id);`;
const INSERT = 'INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id, name, category_id, status';
const PAGE = 'SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?';
const BY_ID = 'SELECT id, name, category_id, status FROM pets WHERE id = ?';
const STATUSES = PET_STATUSES;
const PETS = 20_000;

interface Driver {
  insert(i: number): unknown;
  page(i: number): unknown;
  byId(i: number): unknown;
  close(): void;
}
function betterSqlite3(path: string): Driver {
  const db = new BetterSqlite3(path);
  db.exec(SCHEMA);
  const [insert, page, byId] = [INSERT, PAGE, BY_ID].map((sql) => db.prepare(sql).safeIntegers(true)) as [
    BetterStatement,
    BetterStatement,
    BetterStatement,
  ];
  const insertOne = db.transaction((i: number) => insert.get(`pet ${i}`, 9223372036854775807n, STATUSES[i % 3]));
  return {
    insert: (i) => insertOne.immediate(i),
    page: (i) => page.all(STATUSES[i % 3], BigInt((i * 7) % PETS), 21),
    byId: (i) => byId.get(BigInt(1 + (i % PETS))),
    close: () => db.close(),
  };
}
function nodeSqlite(path: string): Driver {
  const db = new DatabaseSync(path);
  db.exec(SCHEMA);
  const [insert, page, byId] = [INSERT, PAGE, BY_ID].map((sql) => {
    const statement = db.prepare(sql);
    statement.setReadBigInts(true);
    return statement;
  }) as [ReturnType<typeof db.prepare>, ReturnType<typeof db.prepare>, ReturnType<typeof db.prepare>];
  return {
    insert: (i) => inWriteTransaction(db, () => insert.get(`pet ${i}`, 9223372036854775807n, STATUSES[i % 3]!)),
    page: (i) => page.all(STATUSES[i % 3]!, BigInt((i * 7) % PETS), 21),
    byId: (i) => byId.get(BigInt(1 + (i % PETS))),
    close: () => db.close(),
  };
}
const work = mkdtempSync(join(tmpdir(), 'petstore-platform-'));
const results = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, open] of [
    ['better-sqlite3 13.2', betterSqlite3],
    ['node:sqlite', nodeSqlite],
  ] as const) {
    const db = open(join(work, `${name.replace(/\W/g, '')}-${round}.db`));
    for (const [operation, count] of [
      ['insert + commit', PETS],
      ['page of 20', PETS],
      ['get by id', 50_000],
    ] as const) {
      const fn = operation === 'insert + commit' ? db.insert : operation === 'page of 20' ? db.page : db.byId;
      const start = process.hrtime.bigint();
      for (let i = 0; i < count; i++) fn(i);
      const key = `${name}: ${operation}`;
      results.set(key, [...(results.get(key) ?? []), Number(process.hrtime.bigint() - start) / count / 1000]);
    }
    db.close();
  }
}
rmSync(work, { recursive: true, force: true });
for (const [label, values] of [...results].sort(([a], [b]) => a.split(': ')[1]!.localeCompare(b.split(': ')[1]!)))
  report(label, values, 'µs');

// ------------------------------------------------------------------------------------------------
header('TypeScript from source (wall time per run)');
const tsxLoader = pathToFileURL(join(referencePackage('tsx', '4.23.15'), 'dist/esm/index.mjs')).href;
function timeRuns(label: string, args: string[]): void {
  const times: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.hrtime.bigint();
    execFileSync(process.execPath, args, { stdio: 'ignore' });
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  report(label, times, 'ms');
}
for (const [label, args] of [
  ['start the CLI (petstore --help)', ['src/cli/main.ts', '--help']],
  ['run test/units/domain.test.ts and test/http/errors.test.ts', ['--test', 'test/units/domain.test.ts', 'test/http/errors.test.ts']],
] as const) {
  timeRuns(`tsx: ${label}`, ['--import', tsxLoader, ...args]);
  timeRuns(`type stripping: ${label}`, [...args]);
}
