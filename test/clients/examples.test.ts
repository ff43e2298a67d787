/** Every example in examples/ runs against a live server process and does what it says. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { keysCreate, startServerProcess, type ServerProcess } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';

const run = promisify(execFile);

test('examples/curl.sh, examples/client.ts and examples/fetch.mjs run against a live server', async (t) => {
  const env = { DATABASE_URL: `sqlite:${join(tempDir(t), 'petstore.db')}` };
  const key = await keysCreate(env, '--plan', 'pro');
  const server: ServerProcess = await startServerProcess(env, { owner: t });
  const exampleEnv = { ...process.env, PETSTORE_URL: server.url, PETSTORE_KEY: key };

  const curl = await run('bash', ['examples/curl.sh'], { env: exampleEnv });
  assert.match(curl.stdout, /"name":"Biscuit"/);

  const client = await run(process.execPath, ['examples/client.ts'], { env: exampleEnv });
  assert.match(client.stdout, /created \d+: Pickle/);
  assert.match(client.stdout, /Biscuit\tavailable/);

  const plain = await run(process.execPath, ['examples/fetch.mjs'], { env: exampleEnv });
  assert.match(plain.stdout, /created \{ id: \d+, name: 'Marmalade'/);
  assert.match(plain.stdout, /Pickle pending/);
  assert.match(plain.stdout, /requests left this window/);
});
