/** Bearer API keys: every way to be refused, environments, revocation, and the headers on each answer. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey } from '../../src/cli/keys.ts';
import { call, errorOf, startTestServer, type TestServer } from '../support/servers.ts';

const ROUTES: [string, string, unknown?][] = [
  ['GET', '/v1/pets'],
  ['POST', '/v1/pets', { name: 'a', categoryId: 1 }],
  ['GET', '/v1/pets/1'],
];

function assertUnauthorized(res: Awaited<ReturnType<typeof call>>, message?: RegExp): void {
  const err = errorOf(res, 401, 'unauthorized');
  assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="petstore"');
  assert.ok(res.headers.get('x-ratelimit-limit'), 'rate-limit headers on a 401');
  if (message) assert.match(err.message, message);
}

describe('authentication', () => {
  let server: TestServer;
  let key: string;
  before(async () => {
    server = await startTestServer();
    key = await server.key('pro');
  });
  after(() => server.close());

  for (const [method, path, body] of ROUTES) {
    test(`${method} ${path} refuses a request without a key, and stores nothing`, async () => {
      assertUnauthorized(await call(server, method, path, { body }), /missing/i);
      assert.equal((await server.store.listPets({ status: undefined, afterId: undefined, limit: 10 })).length, 0);
    });

    test(`${method} ${path} refuses malformed, unknown and forged keys`, async () => {
      for (const header of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer ', key, `Token ${key}`, 'Bearer a b', `Bearer ${key}x`]) {
        assertUnauthorized(await call(server, method, path, { body, headers: { authorization: header } }));
      }
      assertUnauthorized(await call(server, method, path, { body, key: 'pet_live_' + 'A'.repeat(43) }), /invalid/i);
    });
  }

  test('the Bearer scheme name is case-insensitive', async () => {
    for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
      const res = await call(server, 'GET', '/v1/pets', { headers: { authorization: `${scheme} ${key}` } });
      assert.equal(res.status, 200, scheme);
    }
  });

  test('a key works at once after it is created', async () => {
    const fresh = await server.key('free');
    assert.equal((await call(server, 'GET', '/v1/pets', { key: fresh })).status, 200);
  });

  test('a revoked key is refused once the cache entry expires (at most KEY_CACHE_TTL_MS, 2 s)', async () => {
    const doomed = await server.key('free');
    assert.equal((await call(server, 'GET', '/v1/pets', { key: doomed })).status, 200);
    const [record] = (await server.store.listKeys()).filter((k) => k.plan === 'free' && !k.revokedAt).slice(-1);
    assert.ok(await server.store.revokeKey(record!.id));
    server.clock.advance(2001);
    assertUnauthorized(await call(server, 'GET', '/v1/pets', { key: doomed }), /revoked/i);
  });

  test('a staging key on a production server is refused with a message that says so', async () => {
    const { key: staging } = await createKey(server.store, 'staging', { plan: 'free' });
    assert.match(staging, /^pet_test_/);
    assertUnauthorized(await call(server, 'GET', '/v1/pets', { key: staging }), /staging/);
  });

  test('a production key on a staging server is refused with a message that says so', async () => {
    const staging = await startTestServer({ environment: 'staging' });
    try {
      const { key: production } = await createKey(staging.store, 'production', { plan: 'free' });
      assertUnauthorized(await call(staging, 'GET', '/v1/pets', { key: production }), /production/);
      const own = await staging.key('free');
      assert.match(own, /^pet_test_/);
      assert.equal((await call(staging, 'GET', '/v1/pets', { key: own })).status, 200);
    } finally {
      await staging.close();
    }
  });

  test('unknown paths under /v1 ask for a key before saying 404', async () => {
    assertUnauthorized(await call(server, 'GET', '/v1/secret'));
    errorOf(await call(server, 'GET', '/v1/secret', { key }), 404, 'not_found');
  });

  test('the OpenAPI document, health and readiness need no key', async () => {
    assert.equal((await call(server, 'GET', '/v1/openapi.json')).status, 200);
    assert.deepEqual((await call(server, 'GET', '/healthz')).json, { status: 'ok' });
    assert.equal((await call(server, 'GET', '/readyz')).status, 200);
  });
});

describe('rate-limit headers', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  test("every /v1 answer carries the plan's per-minute figure, errors included", async () => {
    const key = await server.key('free');
    const answers = [
      await call(server, 'GET', '/v1/pets', { key }),
      await call(server, 'POST', '/v1/pets', { key, body: { name: 'a', categoryId: 1 } }),
      await call(server, 'GET', '/v1/pets/1', { key }),
      await call(server, 'POST', '/v1/pets', { key, body: '{' }),
      await call(server, 'GET', '/v1/pets/999', { key }),
      await call(server, 'DELETE', '/v1/pets', { key }),
      await call(server, 'POST', '/v1/pets', { key, body: 'x', headers: { 'content-type': 'text/plain' } }),
      await call(server, 'POST', '/v1/pets', { key, body: JSON.stringify({ name: 'x'.repeat(70_000) }) }),
      await call(server, 'GET', '/v1/unknown', { key }),
    ];
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 201, 200, 400, 404, 405, 415, 413, 404],
    );
    answers.forEach((res, i) => {
      assert.equal(res.headers.get('x-ratelimit-limit'), '60');
      assert.equal(res.headers.get('x-ratelimit-remaining'), String(59 - i));
      const reset = Number(res.headers.get('x-ratelimit-reset'));
      assert.equal(reset, Math.ceil((server.clock.now() + 1) / 60_000) * 60);
      assert.equal(res.headers.get('ratelimit-policy'), '"minute";q=60;w=60, "day";q=1000;w=86400');
      assert.match(res.headers.get('ratelimit')!, /^"minute";r=\d+;t=\d+, "day";r=\d+;t=\d+$/);
    });
  });

  test('each plan shows its own figure', async () => {
    for (const [plan, figure] of [
      ['pro', '300'],
      ['business', '1000'],
    ] as const) {
      const res = await call(server, 'GET', '/v1/pets', { key: await server.key(plan) });
      assert.equal(res.headers.get('x-ratelimit-limit'), figure);
    }
    const enterprise = await server.key('enterprise', { rpm: 5000, rpd: 200_000 });
    assert.equal((await call(server, 'GET', '/v1/pets', { key: enterprise })).headers.get('x-ratelimit-limit'), '5000');
  });

  test('a key beyond its per-minute limit gets 429 rate_limited with Retry-After matching the reset', async () => {
    const key = await server.key('enterprise', { rpm: 3, rpd: 100 });
    for (let i = 0; i < 3; i++) assert.equal((await call(server, 'GET', '/v1/pets', { key })).status, 200);
    const res = await call(server, 'GET', '/v1/pets', { key });
    errorOf(res, 429, 'rate_limited');
    const reset = Number(res.headers.get('x-ratelimit-reset'));
    const retryAfter = Number(res.headers.get('retry-after'));
    assert.equal(res.headers.get('x-ratelimit-remaining'), '0');
    assert.equal(Math.floor(server.clock.now() / 1000) + retryAfter, reset);
    server.clock.advance(retryAfter * 1000);
    assert.equal((await call(server, 'GET', '/v1/pets', { key })).status, 200);
  });
});
