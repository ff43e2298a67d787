/**
 * A 201 means the pet is stored, and nothing else is: kill -9 the server in the middle of concurrent
 * creates, start it again on the same database, and every acknowledged pet is there exactly as
 * acknowledged, while every other stored pet belongs to a request that was still in flight at the
 * kill. On SQLite (where concurrent creates share group commits) and on PostgreSQL.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { createTestDatabase, requirePostgres } from '../support/engines.ts';
import { startServerProcess, unlimitedKey } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';

interface StoredPet {
  id: number;
  name: string;
  categoryId: number;
  status: string;
}

const WRITERS = 32;

async function crashMidLoad(t: TestContext, databaseUrl: string): Promise<void> {
  const env = { DATABASE_URL: databaseUrl };
  const key = await unlimitedKey(env);
  const server = await startServerProcess(env, { owner: t });

  const acknowledged = new Map<string, StoredPet>();
  const inFlight = new Set<string>(); // sent, with no answer yet
  const failures: string[] = []; // anything but a 201 before the kill
  let killed = false;
  const worker = async (w: number) => {
    for (let i = 0; !killed; i++) {
      const name = `w${w}-${i}`;
      inFlight.add(name);
      let status: number;
      let text: string;
      try {
        const res = await fetch(`${server.url}/v1/pets`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name, categoryId: w * 100_000 + i + 1 }),
        });
        status = res.status;
        text = await res.text();
      } catch (err) {
        // After the kill the connection dies with the server, and the name stays in flight; before
        // it, a failed request is a failure of the service.
        if (!killed) failures.push(`${name}: ${(err as Error).message}`);
        return;
      }
      if (killed) return; // answered after the kill was decided: treat as in flight
      inFlight.delete(name);
      if (status !== 201) {
        failures.push(`${name}: ${status} ${text}`);
        return;
      }
      acknowledged.set(name, JSON.parse(text) as StoredPet);
      // Kill once 200 pets are acknowledged, with every writer's next request in flight.
      if (acknowledged.size >= 200) {
        killed = true;
        server.child.kill('SIGKILL');
      }
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, (_, w) => worker(w)));
  if (!killed) server.child.kill('SIGKILL'); // every writer stopped on a failure, reported below
  await server.exited;
  assert.deepEqual(failures, [], 'every create before the kill was answered 201');
  assert.ok(acknowledged.size >= 200);
  assert.ok(!server.output().includes(key), 'the key appeared in the log');
  assert.doesNotMatch(server.output(), /authorization|bearer/i);

  const again = await startServerProcess(env, { owner: t });
  try {
    const stored = new Map<string, StoredPet>();
    let next: string | null = '/v1/pets?limit=100';
    while (next) {
      const res = await fetch(again.url + next, { headers: { authorization: `Bearer ${key}` } });
      for (const pet of (await res.json()) as StoredPet[]) stored.set(pet.name, pet);
      next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
    }
    for (const [name, pet] of acknowledged) assert.deepEqual(stored.get(name), pet, `acknowledged ${name} lost or changed`);
    const unexplained = [...stored.keys()].filter((name) => !acknowledged.has(name) && !inFlight.has(name));
    assert.deepEqual(unexplained, [], 'pets stored that were neither acknowledged nor in flight');
    const inFlightStored = [...inFlight].filter((name) => stored.has(name)).length;
    console.log(
      `# ${databaseUrl.split(':')[0]}: ${acknowledged.size} acknowledged, all present; ${inFlight.size} in flight at the kill, ${inFlightStored} of them stored`,
    );
  } finally {
    again.child.kill('SIGTERM');
    assert.equal(await again.exited, 0, 'SIGTERM ends the server with status 0');
  }
}

test('SQLite: every 201 survives a kill -9, and nothing unacknowledged appears but in-flight creates', async (t) => {
  await crashMidLoad(t, `sqlite:${join(tempDir(t), 'petstore.db')}`);
});

test('PostgreSQL: every 201 survives a kill -9, and nothing unacknowledged appears but in-flight creates', async (t) => {
  if (!requirePostgres(t, 'PostgreSQL crash test')) return;
  await crashMidLoad(t, (await createTestDatabase(t)).url);
});
