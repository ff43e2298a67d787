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
 * Each server is pinned to core 0 (one of two workers to cores 0 and 1) and wrk (one thread) to core 1.
 * Idle cores poll rather than halt
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
 * as successes), is one entry in `scenarios()` (run/scenarios.ts):
 *   { label: 'SQLite 1k: GET /v1/pets?limit=20, If-None-Match', server: 'sqlite-1k', path: LIST, expect: 304,
 *     headers: (first) => ({ 'If-None-Match': first.headers.get('etag')! }) }
 * or `headers: { 'Accept-Encoding': 'br' }`. Before the warm-up each scenario's request is sent once
 * and must get its expected status.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { CLK_TCK, peakRssMiB } from './cpu.ts';
import { postgresReachable } from './run/datasets.ts';
import { measure, type Sample } from './run/measure.ts';
import { abTable, budget, budgetTable, commit, guardLines, guardTable, int, notes, pct, rowOf, scenarioTable } from './run/report.ts';
import { firstPage, ready, scenarios, serverStarts, type Ready } from './run/scenarios.ts';
import type { Server } from './run/servers.ts';
import { workersTable } from './run/workers-report.ts';
import { cleanUp, idlePolling, started, work } from './run/session.ts';
import {
  A,
  CONNECTIONS,
  GUARD,
  MAX_PARTS,
  MIX_WARMUP_SECONDS,
  OTHERS,
  ROUNDS,
  SECONDS,
  WARMUP_SECONDS,
  describeVariant,
} from './run/settings.ts';

export type { GuardLine } from './run/report.ts';

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
    ...workersTable(rows),
    '',
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
