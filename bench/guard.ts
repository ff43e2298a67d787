/**
 * `npm run bench:guard`: the CPU guard CI runs. The reference build (the commit named in
 * bench/reference-commit.txt) and this checkout's build serve the same six requests in the same
 * alternating rounds, each started as its own `npm start` starts it, server on core 0 and wrk on
 * core 1 (bench/run.ts with BENCH_B_CHECKOUT and BENCH_GUARD). A request whose CPU time per request
 * is more than GUARD_LIMIT times the reference's (the median of the rounds' paired ratios) is
 * measured once more on its own, over twice the rounds; the guard fails when it is over the limit again.
 *
 * The reference is exported from git (it must be in this clone's history), installed with `npm ci`
 * and built once per commit and Node.js release, in a cache folder outside the checkout.
 * Environment: BENCH_GUARD_LIMIT (1.15), BENCH_GUARD_REFERENCE (a commit instead of the file's: HEAD runs this
 * build against itself), BENCH_ROUNDS (15), BENCH_SECONDS (1), BENCH_A_SLOWDOWN (run.ts).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { GuardLine } from './run.ts';

const GUARD_LIMIT = process.env.BENCH_GUARD_LIMIT ?? '1.15';
/**
 * The requests the guard watches: the cached list, getPet, creates on each engine, and the list that
 * misses the page cache (PAGE_CACHE_BYTES=0) on each engine (BENCHMARKS.md, "The CPU guard").
 */
const WATCHED = [
  'SQLite 1k: GET /v1/pets?limit=20',
  'SQLite 1k, no page cache: GET /v1/pets?limit=20',
  'SQLite 1k: GET /v1/pets/{id}',
  'SQLite: POST /v1/pets',
  'PostgreSQL+Redis: POST /v1/pets',
  'PostgreSQL+Redis 1k, no page cache: GET /v1/pets?limit=20',
];

const escape = (label: string) => label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const only = (labels: string[]) => `^(${labels.map(escape).join('|')})$`;

/** The reference commit: BENCH_GUARD_REFERENCE (any name git knows, to try the guard), or the one bench/reference-commit.txt names. */
function referenceCommit(): string {
  const named = process.env.BENCH_GUARD_REFERENCE;
  if (named) return execFileSync('git', ['rev-parse', '--verify', `${named}^{commit}`], { encoding: 'utf8' }).trim();
  const text = readFileSync(join(import.meta.dirname, 'reference-commit.txt'), 'utf8');
  const commit = /^([0-9a-f]{40})\b/m.exec(text)?.[1];
  if (!commit) throw new Error('bench/reference-commit.txt names no commit (40 hexadecimal digits at the start of a line)');
  return commit;
}

/** The reference, built, in a folder of its own; made on first use and kept for later runs. */
function referenceBuild(commit: string): string {
  const cache = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'petstore-bench');
  const dir = join(cache, `reference-${commit.slice(0, 12)}-node${process.versions.node}`);
  if (existsSync(join(dir, 'dist/cli/main.js'))) return dir;
  mkdirSync(cache, { recursive: true });
  // Built in a folder of its own and moved into place once built, so a broken build is never taken for one.
  const building = mkdtempSync(join(cache, '.building-'));
  try {
    console.log(`Building the reference ${commit.slice(0, 12)} in ${dir} ...`);
    const archive = execFileSync('git', ['archive', '--format=tar', commit], { maxBuffer: 1 << 30 });
    execFileSync('tar', ['-x', '-C', building], { input: archive });
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: building, stdio: 'inherit' });
    rmSync(dir, { recursive: true, force: true });
    renameSync(building, dir);
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
  return dir;
}

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);

/** One run of the benchmark on the given requests, in this many rounds; its guard lines. */
function measure(reference: string, labels: string[], rounds: number): GuardLine[] {
  // A run that fails before its verdict must not leave an earlier run's verdict to be read.
  const verdict = join(import.meta.dirname, 'last-guard.json');
  rmSync(verdict, { force: true });
  const result = spawnSync(process.execPath, [join(import.meta.dirname, 'run.ts')], {
    stdio: 'inherit',
    env: {
      ...process.env,
      // Many short rounds: each pair of runs meets the machine within two seconds, and the median is of many pairs.
      BENCH_ROUNDS: String(rounds),
      BENCH_SECONDS: process.env.BENCH_SECONDS ?? '1',
      BENCH_ONLY: only(labels),
      BENCH_B_CHECKOUT: reference,
      BENCH_GUARD: GUARD_LIMIT,
      BENCH_AB: undefined,
    },
  });
  if (result.status !== 0 && result.status !== 1) throw new Error(`the benchmark failed (status ${result.status ?? result.signal})`);
  if (!existsSync(verdict)) throw new Error(`the benchmark ended (status ${result.status}) without a verdict`);
  const lines = JSON.parse(readFileSync(verdict, 'utf8')) as GuardLine[];
  const missing = labels.filter((label) => !lines.some((g) => g.label === label));
  if (missing.length) throw new Error(`not measured: ${missing.join('; ')} (are PostgreSQL and Redis reachable?)`);
  return lines;
}

const commit = referenceCommit();
const reference = referenceBuild(commit);
const first = measure(reference, WATCHED, ROUNDS);
const suspects = first.filter((g) => g.failed).map((g) => g.label);
if (suspects.length) console.log(`\nOver ${GUARD_LIMIT} × the reference in the first run: ${suspects.join('; ')}. Measuring again ...`);
// Alone and over twice the rounds: a narrower median, in about the time of the first run.
const again = suspects.length ? measure(reference, suspects, 2 * ROUNDS) : [];
const median = (g: GuardLine | undefined) => (g?.ratio ? g.ratio.median.toFixed(2) : 'not measured');
const show = (g: GuardLine) => {
  const second = again.find((x) => x.label === g.label);
  return `${g.label}: ${second ? `${median(second)} (first ${median(g)})` : median(g)}`;
};
const failed = again.filter((g) => g.failed);
const summary =
  `CPU guard against ${commit.slice(0, 12)} (limit ${GUARD_LIMIT} × its CPU per request): ` +
  `${failed.length ? 'FAILED' : 'passed'}: ${first.map(show).join('; ')}`;
console.log(`\n${summary}`);
process.exit(failed.length ? 1 : 0);
