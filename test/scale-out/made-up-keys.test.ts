/**
 * Made-up keys from one address, on three instances sharing one PostgreSQL and a Redis of the test's own:
 * a key whose tag does not pass costs no lookup and no Redis call but its address's count, and a valid
 * key new to an instance is never answered with the address's 429, however many made-up keys (tagless or
 * with a forged tag) that address sent, while Redis answers and while it is paused (stopped: its
 * connections stay open and nothing is answered). Keys made by `petstore keys create` while the servers
 * run, and keys of the old format (no tag) stored before they started, are both valid keys here.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createTestDatabase, openTestPostgresStore } from '../support/engines.ts';
import { keysCreate, startServerProcess, stopServer, type ServerProcess } from '../support/processes.ts';
import { startRedis, type RedisProcess } from '../support/redis-servers.ts';
import { createUntaggedKey } from '../support/servers.ts';
import { atEnd, suiteOwner, tempDir } from '../support/temp.ts';

const TOKEN = 'metrics-token-0123456789';

/** A key of the shape issued before tags, never issued. */
const madeUpKey = () => 'pet_live_' + randomBytes(32).toString('base64url');
/** A key of the tagged shape whose tag no secret made. */
const forgedKey = () => madeUpKey() + randomBytes(8).toString('base64url');

interface Answer {
  status: number;
  code: string | undefined;
  headers: Headers;
}

async function get(server: ServerProcess, key: string): Promise<Answer> {
  const res = await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(15_000) });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, code: body.code, headers: res.headers };
}

/** The address's 429: its one window, nothing of a key's. */
function assertAddressRefusal(answer: Answer, context: string): void {
  assert.equal(answer.status, 429, context);
  assert.equal(answer.code, 'rate_limited', context);
  assert.equal(answer.headers.get('ratelimit-policy'), '"minute";q=60;w=60', context);
}

/** A key's 200, charged to the key: a Pro key's two windows. */
function assertAdmittedAsPro(answer: Answer, context: string): void {
  assert.equal(answer.status, 200, `${context}: ${answer.status} ${answer.code}`);
  assert.equal(answer.headers.get('ratelimit-policy'), '"minute";q=300;w=60, "day";q=10000;w=86400', context);
}

/** The instance's store lookups so far (petstore_keys_looked_up_total). */
async function lookups(server: ServerProcess): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  const line = text.split('\n').find((l) => l.startsWith('petstore_keys_looked_up_total '));
  assert.ok(line, 'the lookup metric is served');
  return Number(line.split(' ')[1]);
}

/** Made-up keys of both shapes, in turn, to one instance until it refuses with the address's 429. */
async function spend(server: ServerProcess, context: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const answer = await get(server, i % 2 ? forgedKey() : madeUpKey());
    if (answer.status === 429) return assertAddressRefusal(answer, context);
    assert.equal(answer.status, 401, context);
  }
  assert.fail(`${context}: 300 made-up keys and no 429`);
}

/** Calls of the limiter's scripts Redis has run since its statistics were reset. */
async function scriptCalls(admin: Redis): Promise<number> {
  const stats = await admin.info('commandstats');
  return [...stats.matchAll(/^cmdstat_(?:eval|evalsha):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

/** Waits for the next minute unless `needMs` of this one are left, so the address's window stays the same throughout. */
async function withinOneMinute(needMs: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < needMs) await sleep(left + 200);
}

describe('made-up keys from one address on three instances', () => {
  // Undone in reverse: the servers, the database, Redis (running again), its folder.
  const suite = suiteOwner();
  let redis: RedisProcess;
  let admin: Redis;
  let env: Record<string, string>;
  let servers: ServerProcess[];
  /** Keys of the old format, stored before the servers started: one per test, each new to every instance. */
  let untagged: string[];

  before(async () => {
    const dir = tempDir(suite);
    redis = await startRedis(dir, 'limits', []);
    atEnd(suite, () => redis.kill());
    atEnd(suite, () => void redis.child.kill('SIGCONT')); // a test that failed while Redis was stopped
    admin = new Redis(redis.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
    atEnd(suite, () => admin.disconnect());
    const database = await createTestDatabase(suite);
    env = { DATABASE_URL: database.url, REDIS_URL: `redis://127.0.0.1:${redis.port}`, METRICS_TOKEN: TOKEN, LOG_LEVEL: 'warn' };
    // As a release before key tags left them: stored untagged, before any instance started.
    const store = await openTestPostgresStore(database.url);
    try {
      untagged = [await createUntaggedKey(store, 'production', 'pro'), await createUntaggedKey(store, 'production', 'pro')];
    } finally {
      await store.close();
    }
    // One after another: the database is migrated already, and three starting at once on a busy machine can outlast the wait.
    servers = [];
    for (let i = 0; i < 3; i++) servers.push(await startServerProcess(env, { owner: suite }));
  });

  test('with Redis answering: a forged tag costs no lookup and one script call, and valid keys new to each instance work', async () => {
    await withinOneMinute(25_000);
    // Each instance has its scripts loaded in Redis before counting starts.
    for (const s of servers) assert.equal((await get(s, forgedKey())).status, 401);
    await admin.config('RESETSTAT');
    const forged = [];
    for (let i = 0; i < 60; i++) forged.push(await get(servers[i % 3]!, forgedKey()));
    assert.deepEqual([...new Set(forged.map((a) => a.status))].sort(), [401, 429], 'the address shared by the instances ran out');
    for (const refused of forged.filter((a) => a.status === 429)) assertAddressRefusal(refused, 'a forged tag past the limit');
    assert.equal(await scriptCalls(admin), 60, "one call per request, the address's count");
    for (const s of servers) assert.equal(await lookups(s), 0, 'no forged tag was looked up');

    const key = await keysCreate(env, '--plan', 'pro');
    for (const [i, s] of servers.entries()) {
      assertAddressRefusal(await get(s, madeUpKey()), `instance ${i}, a made-up key`);
      assertAdmittedAsPro(await get(s, key), `instance ${i}, a key made by the CLI`);
      assertAdmittedAsPro(await get(s, untagged[0]!), `instance ${i}, a key without a tag`);
    }
    for (const [i, s] of servers.entries()) assertAddressRefusal(await get(s, forgedKey()), `instance ${i}: the address is still spent`);
  });

  test('with Redis paused: every instance refuses made-up keys with its own count, and still admits valid keys new to it', async () => {
    await withinOneMinute(30_000);
    redis.child.kill('SIGSTOP');
    try {
      // Made by the CLI during the outage: the CLI needs only the database.
      const key = await keysCreate(env, '--plan', 'pro');
      for (const [i, s] of servers.entries()) {
        await spend(s, `instance ${i}`);
        const before = await lookups(s);
        for (let n = 0; n < 20; n++) assertAddressRefusal(await get(s, forgedKey()), `instance ${i}, forged tag ${n}`);
        assert.equal(await lookups(s), before, `instance ${i}: no forged tag was looked up`);
        // An untagged made-up key takes the address's lookup of this second, if it is still free.
        assertAddressRefusal(await get(s, madeUpKey()), `instance ${i}, a made-up key`);
        assertAdmittedAsPro(await get(s, key), `instance ${i}, a key made by the CLI during the outage`);
        assertAdmittedAsPro(await get(s, untagged[1]!), `instance ${i}, a key without a tag`);
      }
      for (const [i, s] of servers.entries()) assertAddressRefusal(await get(s, madeUpKey()), `instance ${i}: the address is still spent`);
    } finally {
      redis.child.kill('SIGCONT');
    }
  });

  test('a restarted instance checks the tags of keys made before it started as the others do', async () => {
    const key = await keysCreate(env, '--plan', 'pro');
    assertAdmittedAsPro(await get(servers[0]!, key), 'before the restart');
    await stopServer(servers[0]!);
    servers[0] = await startServerProcess(env, { owner: suite });
    assertAdmittedAsPro(await get(servers[0], key), 'after the restart');
    const before = await lookups(servers[0]);
    const altered = await get(servers[0], key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'));
    assert.ok(altered.status === 401 || altered.status === 429, `its tag altered: ${altered.status}`);
    assert.equal(await lookups(servers[0]), before, 'and refused without a lookup');
  });
});
