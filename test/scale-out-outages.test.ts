/**
 * Outages, through TCP proxies the test owns between the service and PostgreSQL or Redis: the
 * service answers quickly and truthfully while a dependency is cut off, and recovers by itself.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase, deleteRedisKeys, newKeyPrefix, REDIS_URL } from './support/engines.ts';
import { freePort, keysCreate, startServerProcess, type ServerProcess } from './support/processes.ts';
import { TcpProxy } from './support/tcp-proxy.ts';
import { eventually } from './support/waiting.ts';

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
  const keyPrefix = newKeyPrefix();

  before(async () => {
    database = await createTestDatabase();
    const pgUrl = new URL(database.url);
    const redisUrl = new URL(REDIS_URL!);
    pgProxy = await TcpProxy.start(pgUrl.hostname, Number(pgUrl.port || 5432));
    redisProxy = await TcpProxy.start(redisUrl.hostname, Number(redisUrl.port || 6379));
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
    server = await startServerProcess(env);
  });

  after(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await pgProxy?.close();
    await redisProxy?.close();
    await deleteRedisKeys(keyPrefix);
    await database?.drop();
  });

  test('PostgreSQL cut off: 503 unavailable with Retry-After within 5 s, /readyz 503, /healthz 200; then recovery', async () => {
    assert.equal((await timed(server, '/v1/pets', { headers: auth() })).status, 200);
    pgProxy.cut();

    const list = await timed(server, '/v1/pets', { headers: auth() });
    assert.equal(list.status, 503, list.text);
    assert.equal(list.body.code, 'unavailable');
    assert.ok(Number(list.headers.get('retry-after')) >= 1);
    assert.ok(list.ms < 5000, `answered in ${list.ms} ms`);
    assert.doesNotMatch(list.text, /postgres|ECONN|timeout|pg/i);

    const post = await timed(server, '/v1/pets', {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'written during the outage', categoryId: 1 }),
    });
    assert.equal(post.status, 503);
    assert.ok(post.ms < 5000, `answered in ${post.ms} ms`);

    const ready = await timed(server, '/readyz');
    assert.equal(ready.status, 503);
    assert.ok(ready.ms < 5000);
    const health = await timed(server, '/healthz');
    assert.equal(health.status, 200);
    assert.ok(health.ms < 1000);

    pgProxy.heal();
    await eventually(async () => (await timed(server, '/readyz')).status === 200, 15_000);
    await eventually(async () => (await timed(server, '/v1/pets', { headers: auth() })).status === 200, 10_000);
    const all = await timed(server, '/v1/pets?limit=100', { headers: auth() });
    assert.ok(!all.text.includes('written during the outage'), 'a POST answered 503 never shows up as a pet');
    const created = await timed(server, '/v1/pets', {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'after the outage', categoryId: 1 }),
    });
    assert.equal(created.status, 201);
  });

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
