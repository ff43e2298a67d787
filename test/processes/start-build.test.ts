/**
 * `npm start` builds only when the sources changed (scripts/build.mjs --if-changed): in a copy of the
 * project, the first start builds dist/ and assets/, a second one reuses them untouched, and a touched
 * or edited source file makes the next start build again, the edit then in dist/. Each start is the
 * real npm start, serving until stopped; what it decided is its one line on stderr.
 */
import assert from 'node:assert/strict';
import { appendFileSync, readdirSync, readFileSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { npmEnv, projectCopy } from '../support/project-copy.ts';
import { freePort, startServerCommand, stopServer } from '../support/processes.ts';
import { tempDir, type Owner } from '../support/temp.ts';

/** What npm start reads and builds from. assets/ comes along where built, to spare the compression. */
const NEEDED = [
  'package.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'openapi.json',
  'src',
  'scripts/build.mjs',
  'scripts/build-record.mjs',
  'scripts/build-docs-assets.mjs',
  'assets',
];
const UP_TO_DATE = 'build: dist/ and assets/ are up to date with their sources';

/** `npm start` in dir until it answers, then stopped: what it printed on stderr, its decision among it. */
async function startOnce(owner: Owner, dir: string, database: string): Promise<string[]> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = npmEnv({ HOST: '127.0.0.1', PORT: String(port), DATABASE_URL: `sqlite:${database}`, LOG_LEVEL: 'warn' });
  // A first build compiles everything: minutes on a busy machine.
  const server = await startServerCommand('npm', ['start'], env, url, { cwd: dir, owner, startWithinMs: 300_000 });
  await stopServer(server);
  return server
    .stderr()
    .split('\n')
    .filter((line) => line.startsWith('build: '));
}

/** Every file under dist/ and assets/ with its modification time. */
function outputTimes(dir: string): Record<string, number> {
  const times: Record<string, number> = {};
  for (const folder of ['dist', 'assets']) {
    for (const entry of readdirSync(join(dir, folder), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const file = join(entry.parentPath, entry.name);
      times[file] = statSync(file).mtimeMs;
    }
  }
  return times;
}

test('npm start builds the first time, not again while the sources are unchanged, and again once one changed', async (t) => {
  const dir = projectCopy(t, NEEDED);
  const database = join(tempDir(t), 'petstore.db');

  const first = await startOnce(t, dir, database);
  assert.match(first.join('\n'), /^build: building dist\/ and assets\/: /, 'the first start builds');
  assert.equal(first.length, 1, first.join('\n'));

  const built = outputTimes(dir);
  assert.equal(await startOnce(t, dir, database).then((lines) => lines.join('\n')), UP_TO_DATE);
  assert.deepEqual(outputTimes(dir), built, 'dist/ and assets/ untouched');

  // Touched, as make sees it: a newer modification time is a change.
  const source = join(dir, 'src', 'start-line.ts');
  const later = new Date(statSync(source).mtimeMs + 5_000);
  utimesSync(source, later, later);
  assert.deepEqual(await startOnce(t, dir, database), [
    'build: building dist/ and assets/: src/start-line.ts changed since the last build',
  ]);

  appendFileSync(source, '\n// edited since the last build\n');
  assert.deepEqual(await startOnce(t, dir, database), [
    'build: building dist/ and assets/: src/start-line.ts changed since the last build',
  ]);
  assert.match(readFileSync(join(dir, 'dist', 'start-line.js'), 'utf8'), /edited since the last build/, 'the edit is built');

  assert.equal(await startOnce(t, dir, database).then((lines) => lines.join('\n')), UP_TO_DATE);
});
