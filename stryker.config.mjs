// Mutation testing of the rate limiter, the bans, the TTL cache behind the key and ban caches, the
// idempotent creates and the JSON body parser: `npm run mutate`, run by hand (CI does not).
// See docs/development.md.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A test file that a mutant makes fail is killed at its first failure, before its `after` hooks remove
// its temporary folders: they go into one folder of this run's own, removed when the run ends.
const scratch = mkdtempSync(join(tmpdir(), 'petstore-mutate-'));
process.env.TMPDIR = scratch;
process.on('exit', () => rmSync(scratch, { recursive: true, force: true }));

// The unit tests, and the SQLite side with the in-process limiter: the files that exercise these modules,
// and no more, since every mutant runs each of these files that reaches it.
const testFiles = [
  'test/units/domain.test.ts',
  'test/units/ttl-cache.test.ts',
  'test/units/limits.test.ts',
  'test/units/memory-limiter.test.ts',
  'test/units/bans.test.ts',
  // The shared table the in-process limiter keeps its counts in, with threads counting at once.
  'test/units/shared-table.test.ts',
  // The in-process limiter and the bans against their model: 300 random sequences, about 3 s.
  'test/units/limits-model.test.ts',
  'test/http/rate-limits.test.ts',
  'test/storage/idempotent-creates.test.ts',
  'test/http/idempotency.test.ts',
  'test/http/key-lifecycle.test.ts',
  'test/http/auth.test.ts',
  'test/http/operations.test.ts',
  // The bad-body table: what each malformed, duplicated or oversized JSON body is refused with
  // (json-bodies.ts; units/domain.test.ts holds its number scanner's unit tests).
  'test/http/errors.test.ts',
];
// The Redis limiter's own tests drive it in-process and need nothing but Redis (and redis-server, for a
// Redis of their own that they stall and restart).
if (process.env.PETSTORE_TEST_REDIS_URL)
  testFiles.push(
    'test/scale-out/quota-blocks.test.ts',
    'test/scale-out/redis-faults.test.ts',
    'test/scale-out/redis-round-trips.test.ts',
    'test/scale-out/redis-limiter.test.ts',
    'test/scale-out/limiter-model.test.ts',
  );

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate: ['src/limits/*.ts', 'src/domain/ttl-cache.ts', 'src/services/idempotent-creates.ts', 'src/http/hooks/json-bodies.ts'],
  // Each test file runs as `node --test-reporter=tap FILE` (Node strips the types; there is no build),
  // and counts as one test: a mutant runs only the files that reached it.
  testRunner: 'tap',
  tap: { testFiles },
  coverageAnalysis: 'perTest',
  // Mutants that break a type still run (Node strips types without checking them): no type checker.
  checkers: [],
  concurrency: 2,
  // The HTTP files take twice as long when other work shares the cores: a mutant counts as a timeout
  // (a kill) only when its files take three times their first run plus 30 s, so load is not a kill.
  timeoutFactor: 3,
  timeoutMS: 30_000,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  // Build output and local data are not needed to run the tests (assets/ is: the docs page's renderer).
  ignorePatterns: ['/dist', '/data', '/.bench', '/test-artifacts', '/client/dist', '/client/node_modules'],
};
