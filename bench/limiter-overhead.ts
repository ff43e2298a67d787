/**
 * What the in-process rate limiter costs: requests per second of GET /v1/pets?limit=20 with the real
 * limiter and with one that admits everything, in alternating rounds of one run. The server is pinned
 * to core 0 and wrk to core 1. Usage: npm run bench:limiter
 */
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKey } from '../src/cli/keys.ts';
import { DEFAULT_PET_STATUS } from '../src/domain/pet.ts';
import { openSqliteStore } from '../src/storage/sqlite/store.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
const db = join(dir, 'petstore.db');

// 1,000 pets and a key whose limits no benchmark reaches, so every answer is a 200.
const store = openSqliteStore({ path: db, synchronous: 'normal' });
for (let i = 0; i < 1000; i++) await store.createPet({ name: `pet ${i}`, categoryId: BigInt(i + 1), status: DEFAULT_PET_STATUS });
const { key } = await createKey(store, 'production', { plan: 'enterprise', rpm: '2000000000', rpd: '2000000000' });
await store.close();
const script = join(dir, 'auth.lua');
writeFileSync(script, `wrk.headers["Authorization"] = "Bearer ${key}"\n`);

async function measure(limiter: string, port: number): Promise<number> {
  const server = spawn('taskset', ['-c', '0', process.execPath, 'bench/server.ts', String(port), db, limiter], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve) => server.stdout!.once('data', () => resolve()));
  const url = `http://127.0.0.1:${port}/v1/pets?limit=20`;
  execFileSync('taskset', ['-c', '1', 'wrk', '-t1', '-c32', '-d2s', '-s', script, url]); // warm-up
  const out = execFileSync('taskset', ['-c', '1', 'wrk', '-t1', '-c32', `-d${SECONDS}s`, '-s', script, url]).toString();
  server.kill('SIGTERM');
  await new Promise((resolve) => server.once('exit', resolve));
  if (/Non-2xx/.test(out)) throw new Error(`non-2xx answers:\n${out}`);
  return Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1]);
}

const results: Record<string, number[]> = { memory: [], unlimited: [] };
for (let round = 0; round < ROUNDS; round++) {
  for (const limiter of round % 2 ? ['unlimited', 'memory'] : ['memory', 'unlimited']) {
    results[limiter]!.push(await measure(limiter, 18080 + round * 2 + (limiter === 'memory' ? 0 : 1)));
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const withLimiter = median(results.memory!);
const without = median(results.unlimited!);
console.log(`GET /v1/pets?limit=20, ${ROUNDS} alternating rounds of ${SECONDS} s, 32 connections`);
console.log(
  `  with the in-process limiter:    ${withLimiter.toFixed(0)} req/s  (rounds: ${results.memory!.map((x) => x.toFixed(0)).join(', ')})`,
);
console.log(
  `  with a limiter that admits all: ${without.toFixed(0)} req/s  (rounds: ${results.unlimited!.map((x) => x.toFixed(0)).join(', ')})`,
);
console.log(`  ratio: ${(withLimiter / without).toFixed(3)}`);
rmSync(dir, { recursive: true, force: true });
