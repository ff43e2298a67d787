/**
 * Runs the test suite on every engine the machine offers: SQLite with the in-process limiter always,
 * then the HTTP suites again on PostgreSQL with Redis, plus the multi-instance and outage tests, when
 * PETSTORE_TEST_POSTGRES_URL and PETSTORE_TEST_REDIS_URL are set. Which file runs where is listed in
 * test/suites.ts; a file in no list (or a listed file that is gone) stops the run. A skipped engine
 * is announced loudly, and under CI=true it is a failure unless PETSTORE_TEST_ENGINES=sqlite asked
 * for the SQLite suite alone (CI does, for its run on the oldest supported Node.js line).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { listProblems, ON_EVERY_ENGINE, ON_POSTGRES_AND_REDIS, ONCE } from '../test/suites.ts';

const present = readdirSync('test').filter((f) => f.endsWith('.test.ts'));
const problems = listProblems(present);
if (problems.length > 0) {
  console.error(['Which engine runs each test file is decided by test/suites.ts:', ...problems].join('\n  '));
  process.exit(1);
}
const inTest = (names: readonly string[]) => names.map((f) => `test/${f}`);

const requested = process.env.PETSTORE_TEST_ENGINES ?? 'all';
if (requested !== 'all' && requested !== 'sqlite') {
  console.error(`PETSTORE_TEST_ENGINES must be all or sqlite, not ${JSON.stringify(requested)}`);
  process.exit(1);
}

function run(engine: string, list: string[]): boolean {
  console.log(`\n=== ${engine} on Node.js ${process.version}: ${list.length} test files ===\n`);
  const result = spawnSync(process.execPath, ['--test', ...list], {
    stdio: 'inherit',
    env: { ...process.env, PETSTORE_TEST_ENGINE: engine },
  });
  return result.status === 0;
}

const banner = (lines: string[]) => console.log(['', '#'.repeat(78), ...lines.map((l) => `#  ${l}`), '#'.repeat(78), ''].join('\n'));
const skipped = 'SKIPPED: the PostgreSQL + Redis suites, the multi-instance and the outage tests.';

let ok = run('sqlite', inTest([...ON_EVERY_ENGINE, ...ONCE]));
if (requested === 'sqlite') {
  banner([skipped, 'PETSTORE_TEST_ENGINES=sqlite asked for the SQLite suite alone.']);
} else if (process.env.PETSTORE_TEST_POSTGRES_URL && process.env.PETSTORE_TEST_REDIS_URL) {
  ok = run('postgres', inTest([...ON_EVERY_ENGINE, ...ON_POSTGRES_AND_REDIS])) && ok;
} else {
  banner([
    skipped,
    'Set PETSTORE_TEST_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)',
    'and PETSTORE_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379) to run them.',
  ]);
  if (process.env.CI === 'true') {
    console.error('CI=true: refusing to pass with engines skipped.');
    ok = false;
  }
}
process.exit(ok ? 0 : 1);
