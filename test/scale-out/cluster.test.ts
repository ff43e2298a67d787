/**
 * Three server processes on one PostgreSQL database and a Redis Cluster of the test's own (three
 * masters, one replica each), reached through REDIS_CLUSTER_NODES: one exact limit per key, its
 * counters in one slot; and a master lost, its replica promoted, with the service serving on in
 * memory meanwhile and returning to the cluster by itself.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import { createTestDatabase, newKeyPrefix } from '../support/engines.ts';
import { countedIn, windowKey } from '../support/shared-counts.ts';
import { freePort, keysCreateJson, startServerProcess, type ServerProcess } from '../support/processes.ts';
import { startCluster, type RedisCluster } from '../support/redis-servers.ts';
import { atEnd, suiteOwner, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const MINUTE_MS = 60_000;

describe('three instances on PostgreSQL and a Redis Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let env: Record<string, string>;
  let prefix: string;
  const servers: { server: ServerProcess; metrics: string }[] = [];

  const get = (i: number, key: string) =>
    fetch(`${servers[i % servers.length]!.server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
  const scrape = async (i: number) => (await fetch(servers[i]!.metrics)).text();
  /** The minute counter of a key, as the limiter names it: the key's subject is the hash tag. */
  const slotOf = async (id: string) => Number(await client.cluster('KEYSLOT', `{key:${id}}`));
  const minuteCounter = (id: string) => windowKey(prefix, `key:${id}`, 'minute');
  // Undone in reverse: the servers, the client, the cluster, the database, then the folder.
  const suite = suiteOwner();

  before(async () => {
    const dir = tempDir(suite);
    cluster = await startCluster(dir);
    atEnd(suite, () => cluster.stop());
    client = new Cluster(cluster.seeds.map((url) => ({ host: '127.0.0.1', port: Number(new URL(url).port) })));
    atEnd(suite, () => client.disconnect());
    database = await createTestDatabase(suite);
    prefix = newKeyPrefix(); // in the test's own cluster, which goes with its keys
    env = { DATABASE_URL: database.url, REDIS_CLUSTER_NODES: cluster.seeds.join(','), REDIS_KEY_PREFIX: prefix, LOG_LEVEL: 'info' };
    // All three start at once, as a deployment's instances do.
    const started = await Promise.all(
      [0, 1, 2].map(async () => {
        const port = await freePort();
        const server = await startServerProcess({ ...env, METRICS_PORT: String(port) }, { owner: suite });
        return { server, metrics: `http://127.0.0.1:${port}/metrics` };
      }),
    );
    servers.push(...started);
  });

  test('a Free key sending round-robin gets exactly 60 admitted in one minute, counted in one slot of the cluster', async () => {
    const { id, key } = await keysCreateJson(env, '--plan', 'free');
    // Every instance first talks to the master of this key's slot through another key of that master,
    // so that the burst finds its connection open and its script loaded: a first connection slower
    // than the limiter's 250 ms on a loaded machine would send decisions to memory, as designed.
    const master = await cluster.masterOf(await slotOf(id));
    let warm: string | undefined;
    for (let i = 0; i < 20 && !warm; i++) {
      const other = await keysCreateJson(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000');
      if ((await cluster.masterOf(await slotOf(other.id))) === master) warm = other.key;
    }
    assert.ok(warm, 'a key on the same master');
    for (let i = 0; i < servers.length; i++) {
      await eventually(async () => (await get(i, warm)).ok && /petstore_ratelimit_degraded 0/.test(await scrape(i)), 10_000);
    }
    if (Date.now() % MINUTE_MS > 45_000) await sleep(MINUTE_MS - (Date.now() % MINUTE_MS) + 200);
    const statuses = await Promise.all(Array.from({ length: 90 }, async (_, i) => (await get(i, key)).status));
    assert.equal(statuses.filter((s) => s === 200).length, 60);
    assert.equal(statuses.filter((s) => s === 429).length, 30);

    const minute = minuteCounter(id);
    assert.equal(await countedIn(client, minute), 60);
    // The day counter sits in the same slot: one script decides both, atomically.
    const day = windowKey(prefix, `key:${id}`, 'day');
    assert.equal(await countedIn(client, day), 60);
    assert.equal(await client.cluster('KEYSLOT', minute), await client.cluster('KEYSLOT', day));
    for (const { server } of servers) {
      assert.match(server.output(), /rate limits in the Redis Cluster seeded by 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+/);
      assert.doesNotMatch(server.output(), /Redis unreachable/);
    }
  });

  test('a master lost: its replica takes over, the service serves on in memory meanwhile, then counts in the cluster again', async () => {
    const { id, key } = await keysCreateJson(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000');
    if (Date.now() % MINUTE_MS > 40_000) await sleep(MINUTE_MS - (Date.now() % MINUTE_MS) + 200);
    assert.equal((await get(0, key)).status, 200);
    const slot = Number(await client.cluster('KEYSLOT', minuteCounter(id)));
    const lost = await cluster.masterOf(slot);
    await lost.kill();

    // Until the replica is promoted the key's slot has no master: every answer is still a 200 with
    // its rate-limit headers, decided in memory.
    const until = Date.now() + 3000;
    for (let i = 0; Date.now() < until; i++) {
      const res = await get(i, key);
      assert.equal(res.status, 200);
      assert.ok(res.headers.get('x-ratelimit-remaining'));
      await sleep(50);
    }
    assert.ok(
      servers.some(({ server }) => /Redis unreachable: rate limiting in memory/.test(server.output())),
      'an instance fell back to memory',
    );

    // The promoted replica serves the slot, and every instance counts there again by itself: by one
    // request, or (this key's limits allow pre-admission) by a block at a time.
    await eventually(async () => (await cluster.masterOf(slot)) !== lost, 30_000).catch(async (err: Error) => {
      throw new Error(`${err.message}: no replica took slot ${slot} over from :${lost.port}\n${await cluster.describe()}`);
    });
    for (let i = 0; i < servers.length; i++) {
      await eventually(async () => {
        const before = await countedIn(client, minuteCounter(id));
        assert.equal((await get(i, key)).status, 200);
        const after = await countedIn(client, minuteCounter(id));
        return after > before && /petstore_ratelimit_degraded 0/.test(await scrape(i));
      }, 20_000);
    }
  });
});
