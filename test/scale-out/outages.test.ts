/**
 * Outages, through TCP proxies the test owns between the service and PostgreSQL or Redis: the
 * service answers quickly and truthfully while a dependency is cut off, and recovers by itself. A
 * create cut off mid-statement (held up by a lock on pets, taken straight on PostgreSQL, when the cut
 * comes) is answered 503: without an Idempotency-Key the answer says the pet may have been stored,
 * and a pet that was stored stays; with one, retries that honour Retry-After get the pet within
 * seconds of the database's return.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createTestDatabase, newKeyPrefix, REDIS_URL } from '../support/engines.ts';
import { freePort, keysCreate, startServerProcess, type ServerProcess } from '../support/processes.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';
import { atEnd, suiteOwner } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

/** The Retry-After of a 503 while PostgreSQL is unreachable, as docs/scale-out.md promises. */
const UNAVAILABLE_RETRY_AFTER = '2';

async function timed(server: ServerProcess, path: string, init: RequestInit = {}) {
  const start = Date.now();
  const res = await fetch(server.url + path, { ...init, signal: AbortSignal.timeout(15_000) });
  const text = await res.text();
  const json = res.headers.get('content-type')?.startsWith('application/json');
  return { status: res.status, headers: res.headers, body: json && text ? JSON.parse(text) : undefined, ms: Date.now() - start, text };
}

const viaProxy = (url: string, port: number) => {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
};

describe('outages', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pgProxy: TcpProxy;
  let redisProxy: TcpProxy;
  let server: ServerProcess;
  let key: string;
  let metricsUrl: string;
  const scrape = async () => (await fetch(metricsUrl, { signal: AbortSignal.timeout(15_000) })).text();
  const auth = () => ({ authorization: `Bearer ${key}` });
  // Undone in reverse: the direct client, the server, the proxies, the Redis keys, the database.
  const suite = suiteOwner();
  /** Straight to PostgreSQL, not through the proxy: to hold a lock on pets and look at what waits. */
  let direct: pg.Client;
  const createPet = (name: string, idempotencyKey?: string) =>
    timed(server, '/v1/pets', {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json', ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
      body: JSON.stringify({ name, categoryId: 1 }),
    });
  /** Until a statement of the service waits for the lock on pets. */
  const createWaiting = () =>
    eventually(
      async () => {
        const { rows } = await direct.query(
          "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
        );
        return rows.length > 0;
      },
      5000,
      20,
    );
  /** A second connection of its own holds the lock, so `direct` can look while it is held. */
  const lockPets = async () => {
    const locker = new pg.Client({ connectionString: database.url });
    locker.on('error', () => undefined);
    await locker.connect();
    await locker.query('BEGIN; LOCK TABLE pets IN SHARE MODE');
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        await locker.query('COMMIT').finally(() => locker.end());
      },
    };
  };
  /** Runs a case that cuts PostgreSQL off with pets locked; whatever happens, the lock goes and the proxy heals. */
  const withPetsLocked = async (fn: (lock: { release(): Promise<void> }) => Promise<void>) => {
    const lock = await lockPets();
    try {
      await fn(lock);
    } finally {
      await lock.release().catch(() => undefined);
      pgProxy.heal();
    }
  };
  const petsNamed = async (name: string) => (await direct.query('SELECT id FROM pets WHERE name = $1', [name])).rows.map((r) => r.id);
  const recover = async () => {
    pgProxy.heal();
    await eventually(async () => (await timed(server, '/readyz')).status === 200, 15_000);
  };

  before(async () => {
    database = await createTestDatabase(suite);
    const keyPrefix = newKeyPrefix(suite);
    const pgUrl = new URL(database.url);
    const redisUrl = new URL(REDIS_URL!);
    pgProxy = await TcpProxy.start(pgUrl.hostname, Number(pgUrl.port || 5432));
    atEnd(suite, () => pgProxy.close());
    redisProxy = await TcpProxy.start(redisUrl.hostname, Number(redisUrl.port || 6379));
    atEnd(suite, () => redisProxy.close());
    const env = {
      DATABASE_URL: viaProxy(database.url, pgProxy.port),
      REDIS_URL: viaProxy(REDIS_URL!, redisProxy.port),
      REDIS_KEY_PREFIX: keyPrefix,
      LOG_LEVEL: 'info',
      // Scraped as an operator would, on the private metrics listener.
      METRICS_PORT: String(await freePort()),
    };
    metricsUrl = `http://127.0.0.1:${env.METRICS_PORT}/metrics`;
    key = await keysCreate(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000');
    server = await startServerProcess(env, { owner: suite });
    direct = new pg.Client({ connectionString: database.url });
    atEnd(suite, () => direct.end());
    await direct.connect();
  });

  test("PostgreSQL cut off: 503 unavailable with Retry-After within 5 s, /readyz 503 and petstore_ready 0 within the check's bound, /healthz 200; then recovery", async () => {
    assert.equal((await timed(server, '/v1/pets', { headers: auth() })).status, 200);
    pgProxy.cut();

    const list = await timed(server, '/v1/pets', { headers: auth() });
    assert.equal(list.status, 503, list.text);
    assert.equal(list.body.code, 'unavailable');
    assert.equal(list.headers.get('retry-after'), UNAVAILABLE_RETRY_AFTER);
    assert.ok(list.ms < 5000, `answered in ${list.ms} ms`);
    assert.doesNotMatch(list.text, /postgres|ECONN|timeout|pg/i);

    const post = await createPet('written during the outage');
    assert.equal(post.status, 503);
    assert.equal(post.headers.get('retry-after'), UNAVAILABLE_RETRY_AFTER);
    assert.ok(post.ms < 5000, `answered in ${post.ms} ms`);
    // It never had a connection, so nothing was sent: the answer does not say the pet may have been stored.
    assert.doesNotMatch(post.body.message, /may have been stored/);

    const ready = await timed(server, '/readyz');
    assert.equal(ready.status, 503);
    assert.ok(ready.ms < 5000);
    // A connection that opens and never answers: the check's own bound answers, before the pool's 2 s.
    assert.equal(ready.body.message, 'Storage did not answer within 1 s');
    // The scrape runs the same check, bounded the same way, and says not ready.
    assert.match(await scrape(), /^petstore_ready 0$/m);
    const health = await timed(server, '/healthz');
    assert.equal(health.status, 200);
    assert.ok(health.ms < 1000);

    pgProxy.heal();
    await eventually(async () => /^petstore_ready 1$/m.test(await scrape()), 15_000);
    await eventually(async () => (await timed(server, '/readyz')).status === 200, 15_000);
    await eventually(async () => (await timed(server, '/v1/pets', { headers: auth() })).status === 200, 10_000);
    const all = await timed(server, '/v1/pets?limit=100', { headers: auth() });
    assert.ok(!all.text.includes('written during the outage'), 'a POST that never reached the database stored nothing');
    const created = await timed(server, '/v1/pets', {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'after the outage', categoryId: 1 }),
    });
    assert.equal(created.status, 201);
  });

  test('a create without an Idempotency-Key cut off mid-statement: 503 saying the pet may have been stored; stored, it stays', () =>
    withPetsLocked(async (lock) => {
      const pending = createPet('cut mid-statement');
      await createWaiting();
      pgProxy.cut();
      const post = await pending;
      assert.equal(post.status, 503);
      assert.equal(post.headers.get('retry-after'), UNAVAILABLE_RETRY_AFTER);
      assert.match(post.body.message, /the pet may have been stored.*Idempotency-Key/);
      // The statement was sent and waits on in PostgreSQL, which has not noticed the connection is gone.
      await lock.release();
      await eventually(async () => (await petsNamed('cut mid-statement')).length === 1, 5000);
      await recover();
      const [id] = await petsNamed('cut mid-statement');
      await sleep(3000); // the undo there used to be ran within a second of the database answering again
      assert.equal((await timed(server, `/v1/pets/${id}`, { headers: auth() })).status, 200, 'nothing deletes it');
      assert.deepEqual(await petsNamed('cut mid-statement'), [id]);
    }));

  test('a create with an Idempotency-Key cut off mid-statement: its claim stays, and retries honouring Retry-After get one pet within seconds', () =>
    withPetsLocked(async (lock) => {
      const pending = createPet('cut with a key', 'outage-1');
      await createWaiting();
      pgProxy.cut();
      const post = await pending;
      const answeredAt = Date.now();
      assert.equal(post.status, 503);
      assert.equal(post.headers.get('retry-after'), UNAVAILABLE_RETRY_AFTER);
      // This time the statement dies with its connection (as when PostgreSQL restarts): nothing commits.
      await direct.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
      );
      await lock.release();
      await recover();

      // A client that waits out every Retry-After, starting with the 503's.
      await sleep(Number(post.headers.get('retry-after')) * 1000);
      const answers: string[] = [];
      for (;;) {
        const retry = await createPet('cut with a key', 'outage-1');
        if (retry.status === 201) break;
        assert.equal(retry.status, 409, retry.text);
        const wait = Number(retry.headers.get('retry-after'));
        assert.ok(wait >= 1 && wait <= 5, `Retry-After ${wait}: at most the 5 s after which a claim may be taken over`);
        answers.push(`409 (Retry-After ${wait})`);
        assert.ok(answers.length <= 5, answers.join(', '));
        await sleep(wait * 1000);
      }
      assert.equal((await petsNamed('cut with a key')).length, 1);
      console.log(`# after the blip: ${[...answers, '201'].join(', ')}; the pet ${Date.now() - answeredAt} ms after the 503`);
    }));

  test('Redis cut off: requests keep being served, limited in memory, with headers, a warning and a metric; then back to Redis', async () => {
    redisProxy.cut();
    for (let i = 0; i < 5; i++) {
      const res = await timed(server, '/v1/pets', { headers: auth() });
      assert.equal(res.status, 200);
      assert.ok(res.headers.get('x-ratelimit-limit'));
      assert.ok(res.ms < 1000, `answered in ${res.ms} ms`);
    }
    const metrics = await scrape();
    assert.match(metrics, /petstore_ratelimit_degraded 1/);
    assert.match(metrics, /petstore_ratelimit_fallback_total [1-9]/);
    assert.match(server.output(), /Redis unreachable/);

    redisProxy.heal();
    await eventually(async () => {
      await timed(server, '/v1/pets', { headers: auth() });
      return /petstore_ratelimit_degraded 0/.test(await scrape());
    }, 15_000);
    assert.match(server.output(), /Redis reachable again/);
  });
});
