/**
 * A 201 means the pet is stored: kill -9 the server in the middle of concurrent creates, start it
 * again on the same file, and every acknowledged pet is there, exactly as acknowledged.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from './helpers.js';
import { runCli, startServerProcess } from './process.js';

test('every pet acknowledged with 201 survives a kill -9, and the log never shows the key', async () => {
  const dir = tempDir();
  const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` };
  try {
    const created = await runCli(['keys', 'create', '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000'], env);
    assert.equal(created.code, 0, created.stderr);
    const key = created.stdout.trim().split('\n').at(-1)!;
    const server = await startServerProcess(env);

    const acknowledged: { id: number; name: string; categoryId: number; status: string }[] = [];
    let stop = false;
    const worker = async (w: number) => {
      for (let i = 0; !stop; i++) {
        try {
          const res = await fetch(`${server.url}/v1/pets`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name: `w${w}-${i}`, categoryId: w * 1000 + i + 1 }),
          });
          if (res.status === 201) acknowledged.push((await res.json()) as (typeof acknowledged)[number]);
          // Stop the moment the 40th pet is acknowledged, with other requests in flight.
          if (acknowledged.length >= 40 && !stop) {
            stop = true;
            server.child.kill('SIGKILL');
          }
        } catch {
          return; // the connection died with the server
        }
      }
    };
    await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(worker));
    await server.exited;
    assert.ok(acknowledged.length >= 40);
    assert.ok(!server.output().includes(key), 'the key appeared in the log');
    assert.doesNotMatch(server.output(), /authorization|bearer/i);

    const again = await startServerProcess(env);
    try {
      const res = await fetch(`${again.url}/v1/pets?limit=100`, { headers: { authorization: `Bearer ${key}` } });
      const stored = (await res.json()) as { id: number }[];
      const byId = new Map(stored.map((p) => [p.id, p]));
      for (const pet of acknowledged) assert.deepEqual(byId.get(pet.id), pet);
      // Anything else stored was in flight when the server died; at most one per worker.
      assert.ok(stored.length - acknowledged.length <= 8);
    } finally {
      again.child.kill('SIGTERM');
      assert.equal(await again.exited, 0, 'SIGTERM ends the server with status 0');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
