/**
 * The int64 recipes of docs/api-document.md, one per JavaScript client (plain fetch, openapi-fetch,
 * axios, openapi-client-axios, swagger-client), each run against a live server process: every one
 * creates pets with categoryId 9007199254740993 (2^53 + 1) and 9223372036854775807 (2^63 - 1) and
 * reads them back, exact both ways. The page shows each file as it is, so what readers copy is what
 * runs here.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { keysCreate, startServerProcess, type ServerProcess } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';

const run = promisify(execFile);
const RECIPES = ['fetch', 'openapi-fetch', 'axios', 'openapi-client-axios', 'swagger-client'];
const source = (name: string) => readFileSync(new URL(`../../examples/int64/${name}.mjs`, import.meta.url), 'utf8');

test('docs/api-document.md shows each int64 recipe and its JSON helper as the files are', () => {
  const page = readFileSync(new URL('../../docs/api-document.md', import.meta.url), 'utf8');
  for (const name of ['int64-json', ...RECIPES])
    assert.ok(page.includes('```js\n' + source(name) + '```'), `${name}.mjs is not on the page as it is`);
});

test('each int64 recipe keeps 2^53 + 1 and 2^63 - 1 exact both ways against a live server', async (t) => {
  const dir = tempDir();
  const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` };
  const key = await keysCreate(env, '--plan', 'pro');
  const server: ServerProcess = await startServerProcess(env);
  t.after(async () => {
    server.child.kill('SIGTERM');
    await server.exited;
    rmSync(dir, { recursive: true, force: true });
  });
  for (const name of RECIPES) {
    const { stdout } = await run(process.execPath, [`examples/int64/${name}.mjs`], {
      env: { ...process.env, PETSTORE_URL: server.url, PETSTORE_KEY: key },
    });
    assert.equal(stdout, '9007199254740993n 9007199254740993n\n9223372036854775807n 9223372036854775807n\n', name);
  }
  // What they keep: JSON.parse alone reads both values rounded.
  const listed = await (await fetch(`${server.url}/v1/pets?limit=2`, { headers: { authorization: `Bearer ${key}` } })).text();
  assert.deepEqual(
    JSON.parse(listed).map((p: { categoryId: number }) => p.categoryId),
    [9007199254740992, 9223372036854775808],
  );
});
