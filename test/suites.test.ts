/** Every test file runs somewhere: each is in exactly one list of test/suites.ts, and each listed file exists. */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';
import { listProblems } from './suites.ts';

test('each test file is in exactly one list of test/suites.ts, and every listed file exists', () => {
  const present = readdirSync(new URL('.', import.meta.url)).filter((f) => f.endsWith('.test.ts'));
  assert.deepEqual(listProblems(present), []);
  assert.deepEqual(listProblems([...present, 'renamed.test.ts']), ['renamed.test.ts is in 0 lists of test/suites.ts, not one']);
});
