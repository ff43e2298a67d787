/**
 * The time limit per test file (test/support/file-time-limit.ts): its setting, and scripts/run-tests.ts
 * run in a folder of the test's own against test files that hang, one waiting forever and one blocked
 * in a loop that never yields: each is stopped and named, the run fails, and the file after them runs.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DEFAULT_FILE_TIMEOUT_SECONDS, FILE_TIMEOUT_VARIABLE, fileTimeoutSeconds } from '../support/file-time-limit.ts';
import { atEnd, killAtExit, tempDir } from '../support/temp.ts';

const RUN_TESTS = fileURLToPath(new URL('../../scripts/run-tests.ts', import.meta.url));

test('the limit is PETSTORE_TEST_FILE_TIMEOUT_SECONDS in whole seconds, 0 for none, 600 unset; anything else names the variable', () => {
  assert.equal(fileTimeoutSeconds(undefined), DEFAULT_FILE_TIMEOUT_SECONDS);
  assert.equal(DEFAULT_FILE_TIMEOUT_SECONDS, 600);
  assert.equal(fileTimeoutSeconds('90'), 90);
  assert.equal(fileTimeoutSeconds('0'), 0);
  for (const bad of ['', ' ', '-5', '1.5', '10s', 'soon']) {
    assert.throws(() => fileTimeoutSeconds(bad), new RegExp(`^Error: ${FILE_TIMEOUT_VARIABLE} must be a whole number of seconds`), bad);
  }
});

/** Test files for run-tests.ts, two at a time: two that hang, and one that passes once a hung one is stopped. */
const FIXTURES = {
  'a-waits-forever.test.ts': `
    import { test } from 'node:test';
    test('waits for what never comes', () => new Promise(() => setInterval(() => {}, 1000)));`,
  // A handler for SIGTERM, as test/support/temp.ts installs, that a blocked event loop never runs: only SIGKILL stops it.
  'b-blocks-its-event-loop.test.ts': `
    import { test } from 'node:test';
    process.on('SIGTERM', () => process.exit(1));
    test('never yields', () => { for (;;); });`,
  'c-passes.test.ts': `
    import { test } from 'node:test';
    test('passes', () => {});`,
};

// Bounded, so that a watchdog that fails to stop a file fails this test instead of hanging it.
const RUN_BOUND = { timeout: 120_000 };

test(
  'scripts/run-tests.ts stops a test file past its limit, names it, fails the run, and runs the files after it',
  RUN_BOUND,
  async (t) => {
    const dir = tempDir(t);
    mkdirSync(join(dir, 'test', 'units'), { recursive: true });
    for (const [name, source] of Object.entries(FIXTURES)) writeFileSync(join(dir, 'test', 'units', name), source);
    // NODE_TEST_CONTEXT marks this file's own process as a test runner's child: a node --test started with it runs nothing.
    const { NODE_TEST_CONTEXT: _ours, ...env } = process.env;
    const run = spawn(process.execPath, [RUN_TESTS], {
      cwd: dir,
      env: { ...env, PETSTORE_TEST_ENGINES: 'sqlite', PETSTORE_TEST_CONCURRENCY: '2', [FILE_TIMEOUT_VARIABLE]: '3' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // a group of its own: the runner and the test files it started go with it
    });
    killAtExit(run);
    atEnd(t, () => {
      if (run.exitCode === null && run.signalCode === null) process.kill(-run.pid!, 'SIGKILL');
    });
    let output = '';
    run.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    run.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => run.once('close', (exitCode) => resolve(exitCode)));

    assert.equal(code, 1, output);
    assert.match(output, /3 test files \(3 of them 2 at a time, 0 alone after\), at most 3 s each \(PETSTORE_TEST_FILE_TIMEOUT_SECONDS\)/);
    assert.match(output, /✔ passes/, 'the file after the hung ones ran');
    const summary = output.slice(output.indexOf('Summary of npm test'));
    assert.match(summary, /FAILED: SQLite with the in-process limiter \(3 files\)/);
    const stopped = summary.split('\n').filter((line) => line.includes('TIMED OUT:'));
    // Two files run at once: the two that hang are stopped in either order.
    assert.deepEqual(
      stopped.map((line) => /TIMED OUT: (\S+) (.*)$/.exec(line)!.slice(1)).sort(),
      [
        ['test/units/a-waits-forever.test.ts', 'still running after 3 s (PETSTORE_TEST_FILE_TIMEOUT_SECONDS); stopped'],
        ['test/units/b-blocks-its-event-loop.test.ts', 'did not stop on SIGTERM; killed'],
        ['test/units/b-blocks-its-event-loop.test.ts', 'still running after 3 s (PETSTORE_TEST_FILE_TIMEOUT_SECONDS); stopped'],
      ],
      summary,
    );
  },
);
