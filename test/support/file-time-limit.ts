/**
 * A time limit per test file, so that a hung file fails the run instead of stalling it.
 * scripts/run-tests.ts preloads this module into `node --test` (`--import`), which passes the flag on to
 * the process it runs each test file in. There it starts a watchdog thread: a file still running
 * PETSTORE_TEST_FILE_TIMEOUT_SECONDS after its process started gets a `TIMED OUT:` line naming it and
 * SIGTERM (test/support/temp.ts then kills the processes and removes the folders the file left), and
 * SIGKILL 5 s later if it is still there: a file blocked in a synchronous call never handles SIGTERM.
 * The runner reports the file as failed and goes on with the others.
 *
 * Node's own `--test-timeout` cannot do this: since Node.js 24 it limits each test, not the file's
 * process, so a file kept alive by a handle after its tests, or blocked, still stalls the run.
 */
import { relative } from 'node:path';
import { Worker } from 'node:worker_threads';

export const FILE_TIMEOUT_VARIABLE = 'PETSTORE_TEST_FILE_TIMEOUT_SECONDS';
/** Several times the slowest file's time on two loaded cores (docs/development.md). */
export const DEFAULT_FILE_TIMEOUT_SECONDS = 600;
/** Between SIGTERM and SIGKILL: time enough for temp.ts's synchronous cleanup. */
const GRACE_MS = 5000;

/** The limit in seconds that `value` (the variable's value) sets; 0 is none. Throws a message naming the variable. */
export function fileTimeoutSeconds(value: string | undefined): number {
  if (value === undefined) return DEFAULT_FILE_TIMEOUT_SECONDS;
  if (!/^\d+$/.test(value)) {
    throw new Error(`${FILE_TIMEOUT_VARIABLE} must be a whole number of seconds (0 for no limit), not ${JSON.stringify(value)}`);
  }
  return Number(value);
}

// Runs on a thread of its own, so that a main thread that never yields is still stopped.
const WATCHDOG = `
const { workerData: { pid, file, seconds, variable, graceMs } } = require('node:worker_threads');
const { writeSync } = require('node:fs');
setTimeout(() => {
  writeSync(2, 'TIMED OUT: ' + file + ' still running after ' + seconds + ' s (' + variable + '); stopped\\n');
  process.kill(pid, 'SIGTERM');
  setTimeout(() => {
    writeSync(2, 'TIMED OUT: ' + file + ' did not stop on SIGTERM; killed\\n');
    process.kill(pid, 'SIGKILL');
  }, graceMs);
}, seconds * 1000);
`;

/** Starts the watchdog of this process's test file; it keeps no process alive. */
function watch(file: string, seconds: number): void {
  const workerData = { pid: process.pid, file: relative(process.cwd(), file), seconds, variable: FILE_TIMEOUT_VARIABLE, graceMs: GRACE_MS };
  new Worker(WATCHDOG, { eval: true, workerData }).unref();
}

// The runner's own process, and processes a test file forks (which inherit the flag), have no test file to watch.
const file = process.argv[1];
if (process.env.NODE_TEST_CONTEXT !== undefined && file !== undefined && file.endsWith('.test.ts')) {
  const seconds = fileTimeoutSeconds(process.env[FILE_TIMEOUT_VARIABLE]);
  if (seconds > 0) watch(file, seconds);
}
