/**
 * Runs the test suite on every engine the machine offers: SQLite with the in-process limiter always,
 * then the HTTP suites again on PostgreSQL with Redis, plus the multi-instance and outage tests, when
 * PETSTORE_TEST_POSTGRES_URL and PETSTORE_TEST_REDIS_URL are set; and then all of that once more
 * through a PgBouncer in transaction pooling mode that this script starts (test/support/pgbouncer.ts),
 * with the storage suites. Which file runs where is decided by its folder (FOLDERS below); a test file
 * outside those folders stops the run, so an added file can never silently not run. A skipped engine
 * is announced loudly, and under CI=true it is a failure unless PETSTORE_TEST_ENGINES=sqlite asked
 * for the SQLite suite alone (CI does, for its run on the oldest supported Node.js line). Each test
 * file has a time limit (PETSTORE_TEST_FILE_TIMEOUT_SECONDS, test/support/file-time-limit.ts): a file
 * still running past it is stopped and fails, named, and the run goes on.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, globSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { FILE_TIMEOUT_VARIABLE, fileTimeoutSeconds } from '../test/support/file-time-limit.ts';
import { pgbouncerInstalled, startPgbouncer } from '../test/support/pgbouncer.ts';

/** Where each folder of test/ runs: in the SQLite pass, the PostgreSQL + Redis pass, and the PgBouncer pass. */
const FOLDERS = {
  http: { sqlite: true, postgres: true, pgbouncer: true }, // the HTTP behaviour, on every engine
  'scale-out': { sqlite: false, postgres: true, pgbouncer: true }, // several instances sharing PostgreSQL and Redis
  storage: { sqlite: true, postgres: false, pgbouncer: true }, // both stores; they start PostgreSQL themselves
  units: { sqlite: true, postgres: false, pgbouncer: false },
  processes: { sqlite: true, postgres: false, pgbouncer: false },
  deployment: { sqlite: true, postgres: false, pgbouncer: false },
  clients: { sqlite: true, postgres: false, pgbouncer: false },
} as const;
type Pass = keyof (typeof FOLDERS)['http'];

const present = globSync('test/**/*.test.ts').sort();
const strays = present.filter((file) => !(file.split('/')[1]! in FOLDERS) || file.split('/').length !== 3);
if (strays.length > 0) {
  console.error(['Test files must sit in one of the folders scripts/run-tests.ts runs:', ...strays].join('\n  '));
  process.exit(1);
}
const filesFor = (pass: Pass) => present.filter((file) => FOLDERS[file.split('/')[1] as keyof typeof FOLDERS][pass]);

const requested = process.env.PETSTORE_TEST_ENGINES ?? 'all';
if (requested !== 'all' && requested !== 'sqlite') {
  console.error(`PETSTORE_TEST_ENGINES must be all or sqlite, not ${JSON.stringify(requested)}`);
  process.exit(1);
}

let fileTimeout: number;
try {
  fileTimeout = fileTimeoutSeconds(process.env[FILE_TIMEOUT_VARIABLE]);
} catch (err) {
  console.error((err as Error).message);
  process.exit(1);
}
const limitWords =
  fileTimeout > 0 ? `at most ${fileTimeout} s each (${FILE_TIMEOUT_VARIABLE})` : `no time limit (${FILE_TIMEOUT_VARIABLE}=0)`;
/** Preloaded into every test file's process: the watchdog that stops a file past its limit. */
const fileTimeLimit = new URL('../test/support/file-time-limit.ts', import.meta.url).href;

/** What one pass ran: its counts, every test or part of a test file skipped (with why), every file stopped at its time limit. */
interface PassResult {
  name: string;
  ok: boolean;
  counts: string;
  skipped: string[];
  timedOut: string[];
}

/**
 * How many test files run at once (PETSTORE_TEST_CONCURRENCY): by default two, or the cores less one where
 * there are more. Most of a file's time is spent waiting on the servers, databases and timers it starts,
 * so two share two cores well. The files in ALONE run after the others, one at a time: what they check
 * is a server's answer to load or to time itself, which another file's load would distort.
 */
const concurrency = Number(process.env.PETSTORE_TEST_CONCURRENCY ?? Math.max(2, availableParallelism() - 1));
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`PETSTORE_TEST_CONCURRENCY must be a whole number of test files, 1 or more, not ${process.env.PETSTORE_TEST_CONCURRENCY}`);
  process.exit(1);
}
const ALONE = new Set([
  'test/processes/slow-clients.test.ts', // connection caps and slow readers, timed against the server
  'test/deployment/alert-timing.test.ts', // alerts firing by their minute at real scrape intervals
  'test/scale-out/fault-schedule.test.ts', // faults placed at given seconds of real minutes
  // The store's transactions counted against a budget: through PgBouncer, with another file's load on the
  // machine, 93 were counted where 79 are allowed (and 74 run alone on PostgreSQL).
  'test/http/auth-cost.test.ts',
]);

const passes: PassResult[] = [];
const work = mkdtempSync(join(tmpdir(), 'petstore-tests-'));

function run(engine: string, label: string, list: string[], env: NodeJS.ProcessEnv = {}): boolean {
  const together = list.filter((file) => !ALONE.has(file));
  const alone = list.filter((file) => ALONE.has(file));
  console.log(
    `\n=== ${label} on Node.js ${process.version}: ${list.length} test files (${together.length} of them ${concurrency} at a time, ` +
      `${alone.length} alone after), ${limitWords} ===\n`,
  );
  const started = performance.now();
  let ok = true;
  const taps: string[] = [];
  for (const [files, atOnce] of [
    [together, concurrency],
    [alone, 1],
  ] as const) {
    if (files.length === 0) continue;
    // The spec reporter for people, and TAP into a file for the summary at the end.
    const tap = join(work, `pass-${passes.length}-${taps.length}.tap`);
    const result = spawnSync(
      process.execPath,
      [
        `--import=${fileTimeLimit}`,
        '--test',
        `--test-concurrency=${atOnce}`,
        '--test-reporter=spec',
        '--test-reporter-destination=stdout',
        '--test-reporter=tap',
        `--test-reporter-destination=${tap}`,
        ...files,
      ],
      { stdio: 'inherit', env: { ...process.env, ...env, PETSTORE_TEST_ENGINE: engine, [FILE_TIMEOUT_VARIABLE]: String(fileTimeout) } },
    );
    ok = result.status === 0 && ok;
    taps.push(existsSync(tap) ? readFileSync(tap, 'utf8') : '');
  }
  const minutes = ((performance.now() - started) / 60_000).toFixed(1);
  const summary = summarise(taps);
  passes.push({ name: `${label} (${list.length} files)`, ok, ...summary, counts: `${summary.counts}, ${minutes} min` });
  return ok;
}

/**
 * The counts from the TAP totals (of each run, added up), the skips: tests skipped with a reason (`# SKIP`), and parts a
 * test file leaves out and announces with a `SKIPPED:` line (PostgreSQL parts, the browser, nginx);
 * and the `TIMED OUT:` lines of files stopped at their time limit.
 */
function summarise(taps: string[]): { counts: string; skipped: string[]; timedOut: string[] } {
  const total = (tap: string, name: string) => [...tap.matchAll(new RegExp(`^# ${name} (\\d+)$`, 'gm'))].at(-1)?.[1];
  const counts = ['tests', 'pass', 'fail', 'skipped']
    .map((name) => {
      const each = taps.map((tap) => total(tap, name));
      return `${name} ${each.includes(undefined) ? '?' : each.reduce((sum, n) => sum + Number(n), 0)}`;
    })
    .join(', ');
  const tap = taps.join('\n');
  const skipped = new Set<string>();
  for (const [, name, reason] of tap.matchAll(/^\s*ok \d+ - (.+?) # SKIP ?(.*)$/gm)) skipped.add(`${name}${reason ? `: ${reason}` : ''}`);
  for (const [, what] of tap.matchAll(/SKIPPED:? (.+?)\s*#*$/gm)) skipped.add(what!.trim());
  const timedOut = [...tap.matchAll(/^\s*# TIMED OUT: (.+)$/gm)].map(([, what]) => what!.trim());
  return { counts, skipped: [...skipped], timedOut };
}

const banner = (lines: string[]) => console.log(['', '#'.repeat(78), ...lines.map((l) => `#  ${l}`), '#'.repeat(78), ''].join('\n'));
const skippedEngines = 'SKIPPED: the PostgreSQL + Redis suites, the multi-instance and the outage tests.';
const notRun: string[] = [];

let ok = run('sqlite', 'SQLite with the in-process limiter', filesFor('sqlite'));
if (requested === 'sqlite') {
  banner([skippedEngines, 'PETSTORE_TEST_ENGINES=sqlite asked for the SQLite suite alone.']);
  notRun.push('the PostgreSQL + Redis pass (PETSTORE_TEST_ENGINES=sqlite)');
} else if (process.env.PETSTORE_TEST_POSTGRES_URL && process.env.PETSTORE_TEST_REDIS_URL) {
  ok = run('postgres', 'PostgreSQL + Redis', filesFor('postgres')) && ok;
  ok = (await runThroughPgbouncer(process.env.PETSTORE_TEST_POSTGRES_URL)) && ok;
} else {
  banner([
    skippedEngines,
    'Set PETSTORE_TEST_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)',
    'and PETSTORE_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379) to run them.',
  ]);
  notRun.push('the PostgreSQL + Redis pass (PETSTORE_TEST_POSTGRES_URL and PETSTORE_TEST_REDIS_URL not set)');
  if (process.env.CI === 'true') {
    console.error('CI=true: refusing to pass with engines skipped.');
    ok = false;
  }
}
rmSync(work, { recursive: true, force: true });

/** The PostgreSQL pass again with PgBouncer (transaction pooling, default settings) in front of the server. */
async function runThroughPgbouncer(postgresUrl: string): Promise<boolean> {
  const label = 'PostgreSQL through PgBouncer (transaction pooling) + Redis';
  if (!pgbouncerInstalled()) {
    banner([`SKIPPED: ${label}: PgBouncer is not installed (apt-get install pgbouncer).`]);
    notRun.push(`${label} (PgBouncer not installed)`);
    if (process.env.CI === 'true') console.error('CI=true: refusing to pass without the PgBouncer pass.');
    return process.env.CI !== 'true';
  }
  const bouncer = await startPgbouncer(postgresUrl);
  try {
    return run('postgres', label, filesFor('pgbouncer'), {
      PETSTORE_TEST_POSTGRES_URL: bouncer.url,
    });
  } finally {
    await bouncer.stop();
  }
}

// One summary at the very end: every part that ran, and every part that did not.
const lines = ['Summary of npm test', ''];
for (const pass of passes) {
  lines.push(`${pass.ok ? 'passed' : 'FAILED'}: ${pass.name}: ${pass.counts}`);
  for (const skip of pass.skipped) lines.push(`    skipped: ${skip}`);
  for (const stopped of pass.timedOut) lines.push(`    TIMED OUT: ${stopped}`);
}
for (const part of notRun) lines.push(`not run: ${part}`);
banner(lines);
process.exit(ok ? 0 : 1);
