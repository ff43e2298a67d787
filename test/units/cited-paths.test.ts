/**
 * Every project file that the docs, comments and shipped files name exists: a test file moved or a module
 * renamed must take the words that cite it along (a reader follows them to nothing otherwise).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Files named on purpose though absent from a checkout, each with why. */
const NAMED_BUT_ABSENT = new Map([
  ['test/units/a-waits-forever.test.ts', 'a test file the time-limit test writes into a folder of its own'],
  ['test/units/b-blocks-its-event-loop.test.ts', 'the same'],
  ['test/deployment/manifests.check.ts', 'the file the Kubernetes test writes to type-check the manifests'],
]);

/**
 * A path from the project's root, in one of its folders, with an extension: how docs and comments name
 * files. One extension only at the end: `database.conf.example` is not `database.conf`.
 */
const CITED =
  /(?<![\w./-])((?:src|test|scripts|bench|deploy|docs|examples|client)\/[\w./-]*\w\.(?:ts|mjs|js|md|ya?ml|json|conf|service|sh))\b(?!\.\w)/g;

test('every project path named in the tracked docs, code and shipped files exists (or is one a run writes, ignored by git)', () => {
  const tracked = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((file) => /\.(md|ts|mjs|js|ya?ml|conf|service)$|(^|\/)Dockerfile$|^\.ci\/run$/.test(file));
  assert.ok(tracked.length > 100, `${tracked.length} files read`);
  const missing: string[] = [];
  for (const file of tracked) {
    if (!existsSync(`${ROOT}${file}`)) continue; // deleted in the working tree, not yet in the index
    for (const [, path] of readFileSync(`${ROOT}${file}`, 'utf8').matchAll(CITED)) {
      if (existsSync(`${ROOT}${path}`) || NAMED_BUT_ABSENT.has(path!)) continue;
      // An output of a run (bench/last-run.md): git ignores it, and the text says what writes it.
      if (spawnSync('git', ['check-ignore', '--no-index', '-q', path!], { cwd: ROOT }).status !== 0) missing.push(`${file} names ${path}`);
    }
  }
  assert.deepEqual(missing, []);
});
