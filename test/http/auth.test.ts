/**
 * Bearer API keys: every way to be refused, environments, revocation, and the headers on each answer.
 * The matrix of routes is the router's own: every route the app registers under the API's base path,
 * recorded as it is registered, is checked against the OpenAPI document's security: an operation that
 * needs a key refuses every request without a valid one (HEAD as its GET), one the document declares
 * keyless answers without, OPTIONS and the document itself answer without a key, as its introduction
 * says, and any other method on an API path is a 405 (which needs no key). A route added later is in
 * the matrix without a change here.
 */
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { createKey } from '../../src/cli/keys.ts';
import { request, type HttpResult } from '../support/raw-http.ts';
import { call, errorOf, startTestServer, storedCount, type TestServer } from '../support/servers.ts';

/** One method at one path, as the router holds it (`:param` segments as registered). */
interface Route {
  method: string;
  url: string;
}

/**
 * A test server and every route its app registered, in the order registered. Fastify announces each
 * new instance on a diagnostics channel, where an `onRoute` hook can join it before its first route.
 */
async function startRecordingRoutes(overrides: Parameters<typeof startTestServer>[0]): Promise<{ server: TestServer; routes: Route[] }> {
  const routes: Route[] = [];
  const channel = diagnostics.channel('fastify.initialization');
  const record = (message: unknown) =>
    (message as { fastify: FastifyInstance }).fastify.addHook('onRoute', (route) => {
      for (const method of [route.method].flat()) routes.push({ method, url: route.url });
    });
  channel.subscribe(record);
  try {
    return { server: await startTestServer(overrides), routes };
  } finally {
    channel.unsubscribe(record);
  }
}

/** What the OpenAPI document says of one operation: whether it needs a key, and a request body it takes. */
interface Operation {
  needsKey: boolean;
  body?: string;
}

/**
 * The document's operations by router route (`GET /v1/pets/:petId`), its base path (the first
 * server's URL) in front of each path. An operation needs a key unless its own `security` is empty.
 */
function operationsOf(doc: any): { base: string; operations: Map<string, Operation> } {
  const base: string = doc.servers[0].url;
  const operations = new Map<string, Operation>();
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(item)) {
      if (typeof operation !== 'object' || !operation.responses) continue; // parameters and the like
      const security = operation.security ?? doc.security ?? [];
      const schema = operation.requestBody?.content?.['application/json']?.schema;
      const example = schema?.$ref ? doc.components.schemas[schema.$ref.split('/').at(-1)].examples?.[0] : schema?.examples?.[0];
      const route = `${base}${path.replace(/\{(\w+)\}/g, ':$1')}`;
      const described = { needsKey: security.length > 0, body: schema ? JSON.stringify(example ?? {}) : undefined };
      operations.set(`${method.toUpperCase()} ${route}`, described);
      // HEAD is described once, in the introduction: wherever GET is, with GET's security.
      if (method === 'get') operations.set(`HEAD ${route}`, described);
    }
  }
  return { base, operations };
}

/** A 401 unauthorized, as node:http sees it, with its challenge and rate-limit headers (and, but for HEAD, the Error body). */
function assertRefused(res: HttpResult, method: string, message?: RegExp): void {
  const context = `${method}: ${res.status} ${res.body}`;
  assert.equal(res.status, 401, context);
  assert.equal(res.headers['www-authenticate'], 'Bearer realm="petstore"', context);
  assert.ok(res.headers['x-ratelimit-limit'], `rate-limit headers on a 401: ${context}`);
  if (method === 'HEAD') return;
  const body = JSON.parse(res.body) as { code: string; message: string };
  assert.equal(body.code, 'unauthorized', context);
  if (message) assert.match(body.message, message, context);
}

/** A 401 unauthorized, as fetch sees it, with its challenge and rate-limit headers. */
function assertUnauthorized(res: Awaited<ReturnType<typeof call>>, message?: RegExp): void {
  const err = errorOf(res, 401, 'unauthorized');
  assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="petstore"');
  assert.ok(res.headers.get('x-ratelimit-limit'), 'rate-limit headers on a 401');
  if (message) assert.match(err.message, message);
}

describe('authentication', () => {
  let server: TestServer;
  let routes: Route[];
  let key: string;
  before(async () => {
    // Room for the matrix's keyless requests, all from one address.
    ({ server, routes } = await startRecordingRoutes({ anonymousPerMinute: 10_000 }));
    key = await server.key('pro');
  });
  after(() => server.close());

  test('every route under the API asks for a key unless the OpenAPI document says it needs none; other methods are 405 without one', async (t) => {
    const document = await call(server, 'GET', `/v1/openapi.json`);
    const { base, operations } = operationsOf(document.json);
    // The introduction's word: OPTIONS answers without a key, and so does the document (just fetched without one).
    for (const method of ['GET', 'HEAD']) operations.set(`${method} ${base}/openapi.json`, { needsKey: false });
    const api = routes.filter((r) => r.url.startsWith(`${base}/`));
    const registered = new Set(api.map((r) => `${r.method} ${r.url}`));
    for (const operation of operations.keys()) assert.ok(registered.has(operation), `${operation} is documented and registered`);
    assert.ok(
      [...operations.values()].some((o) => o.needsKey),
      'some operation needs a key',
    );

    for (const { method, url } of api) {
      const operation = operations.get(`${method} ${url}`);
      const target = server.url + url.replace(/:\w+/g, '1');
      const send = (headers: Record<string, string> = {}) =>
        request(target, {
          method,
          headers: operation?.body === undefined ? headers : { 'content-type': 'application/json', ...headers },
          body: operation?.body,
        });
      const label = `${method} ${url}`;
      if (operation === undefined && method === 'OPTIONS') {
        await t.test(`${label} is 204 with Allow, without a key`, async () => {
          const res = await send();
          assert.equal(res.status, 204, `${label}: ${res.status} ${res.body}`);
          assert.ok(res.headers.allow, label);
        });
      } else if (operation === undefined) {
        // Not an operation of this path: the 405 that restates the document, for anyone.
        await t.test(`${label} is 405 with Allow, without a key`, async () => {
          const res = await send();
          assert.equal(res.status, 405, `${label}: ${res.status} ${res.body}`);
          assert.ok(res.headers.allow, label);
        });
      } else if (!operation.needsKey) {
        await t.test(`${label} answers without a key, as the document says`, async () => {
          const res = await send();
          assert.ok(res.status >= 200 && res.status < 300, `${label}: ${res.status} ${res.body}`);
        });
      } else {
        await t.test(`${label} refuses a request without a key, and stores nothing`, async () => {
          const before = await storedCount(server);
          assertRefused(await send(), method, /missing/i);
          assert.equal(await storedCount(server), before);
        });
        await t.test(`${label} refuses malformed, unknown and forged keys`, async () => {
          for (const header of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer ', key, `Token ${key}`, 'Bearer a b', `Bearer ${key}x`]) {
            assertRefused(await send({ authorization: header }), method);
          }
          assertRefused(await send({ authorization: `Bearer pet_live_${'A'.repeat(43)}` }), method, /invalid/i);
          // The shape of a key issued since tags, with a tag the database's secret did not make.
          assertRefused(await send({ authorization: `Bearer ${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}` }), method, /invalid/i);
        });
      }
    }
  });

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
