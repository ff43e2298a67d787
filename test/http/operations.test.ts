/**
 * What the operator relies on: request ids on every answer, in error bodies and in log lines; one
 * JSON log line per request with its fields and nothing secret; Prometheus metrics for requests,
 * refusals, bans, deprecated calls, the limiter and readiness; /metrics off the public listener unless a token is set; security headers;
 * CORS off by default and exact when configured.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hashKey } from '../../src/domain/api-key.ts';
import { createLogger, requestLogger } from '../../src/logger.ts';
import { exchange } from '../support/raw-http.ts';
import { call, startTestServer, type TestServer } from '../support/servers.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("a request's logger", () => {
  /** A logger at `level` writing to an array, and the children made of it. */
  function recording(level: 'info' | 'warn') {
    const written: Record<string, unknown>[] = [];
    const parent = createLogger(level, { write: (line: string) => void written.push(JSON.parse(line)) });
    const made: unknown[] = [];
    const child = parent.child.bind(parent);
    parent.child = ((...args: Parameters<typeof parent.child>) => (made.push(args[0]), child(...args))) as typeof parent.child;
    return { parent, written, made };
  }

  test('is made only when the request writes a line, once, and its lines carry the request id', () => {
    const { parent, written, made } = recording('warn');
    const log = requestLogger.call(null as never, parent, { requestId: 'r-1' }, {}, undefined as never);
    assert.equal(log.level, 'warn');
    log.info('below the level');
    log.debug({ a: 1 }, 'below the level');
    assert.deepEqual([made.length, written.length], [0, 0], 'nothing made or written for a quiet request');
    log.warn({ keyId: 'k' }, 'first');
    log.error(new Error('boom'), 'second');
    assert.equal(made.length, 1, 'one child for the request');
    assert.deepEqual(
      written.map((l) => [l.requestId, l.msg, l.level]),
      [
        ['r-1', 'first', 40],
        ['r-1', 'second', 50],
      ],
    );
    assert.equal(written[0]!.keyId, 'k');
  });

  test("a route's own log level makes the child at once, at that level", () => {
    const { parent, written, made } = recording('warn');
    const log = requestLogger.call(null as never, parent, { requestId: 'r-2' }, { level: 'info' }, undefined as never);
    assert.equal(made.length, 1);
    assert.equal(log.level, 'info');
    log.info('at info');
    assert.deepEqual(
      written.map((l) => [l.requestId, l.msg]),
      [['r-2', 'at info']],
    );
  });
});

describe('request ids', () => {
  let server: TestServer;
  const lines: string[] = [];
  test.before(async () => {
    server = await startTestServer({ logLevel: 'info' }, { onLog: (line) => lines.push(line) });
  });
  test.after(() => server.close());

  test('a safe incoming X-Request-Id is kept; on success, on errors, in the body and in the log line', async () => {
    const key = await server.key('free');
    const ok = await call(server, 'GET', '/v1/pets', { key, headers: { 'x-request-id': 'trace-abc.123:x' } });
    assert.equal(ok.headers.get('x-request-id'), 'trace-abc.123:x');
    const bad = await call(server, 'GET', '/v1/pets?limit=0', { key, headers: { 'x-request-id': 'trace-bad-1' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.headers.get('x-request-id'), 'trace-bad-1');
    assert.equal(bad.json.requestId, 'trace-bad-1');
    const logged = lines.map((l) => JSON.parse(l)).filter((l) => l.requestId === 'trace-bad-1' && l.msg === 'request');
    assert.equal(logged.length, 1);
    assert.equal(logged[0].status, 400);
  });

  test('an unsafe or missing X-Request-Id is replaced by a new UUID, different for each request', async () => {
    const unauthorized = await call(server, 'GET', '/v1/pets', { headers: { 'x-request-id': 'bad id with spaces' } });
    assert.match(unauthorized.headers.get('x-request-id')!, UUID);
    assert.equal(unauthorized.json.requestId, unauthorized.headers.get('x-request-id'));
    const long = await call(server, 'GET', '/healthz', { headers: { 'x-request-id': 'a'.repeat(129) } });
    assert.match(long.headers.get('x-request-id')!, UUID);
    const a = await call(server, 'GET', '/healthz');
    const b = await call(server, 'GET', '/healthz');
    assert.notEqual(a.headers.get('x-request-id'), b.headers.get('x-request-id'));
  });

  test('answers written on the raw socket carry a request id too', async () => {
    const text = await exchange(server.url, 'GET /v1/pets HTTP/1.1\r\nHost: x\r\nBad Header: x\r\n\r\n');
    const id = /X-Request-Id: (\S+)/.exec(text)?.[1];
    assert.match(id ?? '', UUID);
    assert.equal(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).requestId, id);
    // Answered before any route hook: it still has the headers every answer carries, and its log line.
    assert.match(text, /X-Content-Type-Options: nosniff\r\n/);
    assert.match(text, /Content-Security-Policy: default-src 'none'/);
    const logged = lines.map((l) => JSON.parse(l)).filter((l) => l.requestId === id && l.msg === 'request');
    assert.equal(logged.length, 1, 'one log line for the raw-socket answer');
    assert.deepEqual([logged[0].status, logged[0].client], [400, '127.0.0.1']);
  });

  test('a refused key is named by its id in the log line, never by the key', async () => {
    const key = await server.key('free');
    const record = await server.store.findKeyByHash(hashKey(key));
    await server.store.revokeKey(record!.id); // never used before, so not in the key cache
    const refused = await call(server, 'GET', '/v1/pets', { key, headers: { 'x-request-id': 'trace-revoked' } });
    assert.equal(refused.status, 401);
    const logged = lines.map((l) => JSON.parse(l)).filter((l) => l.requestId === 'trace-revoked');
    assert.equal(logged[0]?.keyId, record!.id);
    assert.ok(!lines.join('\n').includes(key));
  });
});

describe('logs', () => {
  test('one JSON line per request: method, route, status, latency, key id, client, request id; no key', async (t) => {
    const lines: string[] = [];
    const server = await startTestServer({ logLevel: 'info' }, { onLog: (line) => lines.push(line) });
    t.after(() => server.close());
    const key = await server.key('free');
    await call(server, 'POST', '/v1/pets', { key, body: { name: 'Logged', categoryId: 1 }, headers: { cookie: 'session=s3cr3t' } });
    const entries = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    assert.equal(entries.length, 1);
    const [entry] = entries;
    assert.deepEqual(
      { method: entry.method, route: entry.route, status: entry.status, client: entry.client },
      { method: 'POST', route: '/v1/pets', status: 201, client: '127.0.0.1' },
    );
    assert.equal(typeof entry.ms, 'number');
    assert.match(entry.keyId, /^key_/);
    assert.match(entry.requestId, UUID);
    assert.equal(entry.level, 30);
    const all = lines.join('\n');
    assert.ok(!all.includes(key), 'the key reached the log');
    assert.ok(!all.includes('s3cr3t'), 'a cookie reached the log');
  });

  test('LOG_LEVEL=warn writes no line per request', async (t) => {
    const lines: string[] = [];
    const server = await startTestServer({ logLevel: 'warn' }, { onLog: (line) => lines.push(line) });
    t.after(() => server.close());
    await call(server, 'GET', '/healthz');
    assert.deepEqual(lines, []);
  });
});

describe('metrics', () => {
  const sample = (text: string, name: string, labels: Record<string, string>): number | undefined => {
    for (const line of text.split('\n')) {
      if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
      if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.split(' ').at(-1));
    }
    return undefined;
  };

  const token = 'metrics-token-0123456789';
  const metricsOf = async (server: TestServer) => (await call(server, 'GET', '/metrics', { key: token })).text;

  test('requests by operation and status, latency, refusals and bans by plan, deprecated calls by plan', async (t) => {
    const server = await startTestServer({ banThreshold: 2, banGraceMs: 0, metricsToken: token });
    t.after(() => server.close());
    const key = await server.key('free');
    const created = await call(server, 'POST', '/v1/pets', { key, body: { name: 'Counted', categoryId: 1 } });
    await call(server, 'GET', `/v1/pets/${created.json.id}`, { key });
    await call(server, 'GET', '/v1/pets/999', { key });
    for (let i = 0; i < 62; i++) await call(server, 'GET', '/v1/pets', { key }); // 58 admitted, then refusals and a ban

    const text = await metricsOf(server);
    assert.equal(sample(text, 'petstore_http_requests_total', { operation: 'createPet', status: '201' }), 1);
    assert.equal(sample(text, 'petstore_http_requests_total', { operation: 'getPet', status: '404' }), 1);
    // 57 lists admitted; then 2 refused rate_limited (the second earns the ban) and 3 refused key_banned.
    assert.equal(sample(text, 'petstore_http_requests_total', { operation: 'listPets', status: '429' }), 5);
    assert.equal(sample(text, 'petstore_http_request_duration_seconds_count', { operation: 'listPets' }), 62);
    // A histogram as Prometheus reads one: cumulative buckets in order, +Inf equal to the count, a sum.
    const buckets = text
      .split('\n')
      .filter((line) => line.startsWith('petstore_http_request_duration_seconds_bucket{') && line.includes('operation="listPets"'));
    assert.equal(buckets.length, 12);
    assert.match(buckets[0]!, /^petstore_http_request_duration_seconds_bucket\{le="0.001",operation="listPets"\} \d+$/);
    assert.match(buckets.at(-1)!, /^petstore_http_request_duration_seconds_bucket\{le="\+Inf",operation="listPets"\} 62$/);
    const counts = buckets.map((line) => Number(line.split(' ').at(-1)));
    assert.deepEqual(
      counts,
      counts.toSorted((a, b) => a - b),
      'cumulative',
    );
    assert.ok(counts[10]! > 0, 'lists answered within 2.5 s are counted below +Inf');
    const sum = sample(text, 'petstore_http_request_duration_seconds_sum', { operation: 'listPets' })!;
    assert.ok(sum > 0 && sum < 62 * 2.5, `sum ${sum}`);
    assert.match(text, /^# TYPE petstore_http_request_duration_seconds histogram$/m);
    assert.equal(sample(text, 'petstore_ratelimit_refusals_total', { plan: 'free' }), 2);
    assert.equal(sample(text, 'petstore_bans_total', { plan: 'free' }), 1);
    assert.equal(sample(text, 'petstore_deprecated_calls_total', { operation: 'getPet', plan: 'free' }), 2);
    assert.doesNotMatch(text, /key_id|key_[A-Za-z0-9]{6}/, 'no label names a key');
    assert.match(text, /petstore_ratelimit_degraded 0/);
  });

  test('every series an alert or a panel counts from is there at 0 before its first event', async (t) => {
    const server = await startTestServer({ metricsToken: token });
    t.after(() => server.close());
    const text = await metricsOf(server);
    const zero = (name: string, labels: Record<string, string>) =>
      assert.equal(sample(text, name, labels), 0, `${name} ${JSON.stringify(labels)}`);
    for (const plan of ['free', 'pro', 'business', 'enterprise']) {
      zero('petstore_bans_total', { plan });
      zero('petstore_ratelimit_refusals_total', { plan });
      zero('petstore_deprecated_calls_total', { operation: 'getPet', plan });
    }
    zero('petstore_ratelimit_refusals_total', { plan: 'anonymous' });
    for (const reason of ['address', 'total']) zero('petstore_connections_refused_total', { reason });
    for (const operation of ['listPets', 'getPet', 'createPet']) {
      for (const status of ['500', '503']) zero('petstore_http_requests_total', { operation, status });
      zero('petstore_http_request_duration_seconds_count', { operation });
    }
  });

  test("an idle instance's scrape shows no query waiting for a pooled connection: not even the scrape's own readiness check", async (t) => {
    const server = await startTestServer({ metricsToken: token });
    t.after(() => server.close());
    for (let i = 0; i < 3; i++) {
      const waiting = sample(await metricsOf(server), 'petstore_db_pool_connections', { state: 'waiting' });
      assert.equal(waiting, process.env.PETSTORE_TEST_ENGINE === 'postgres' ? 0 : undefined, `scrape ${i + 1}`);
    }
  });

  test('/metrics is not served on the public listener unless METRICS_TOKEN is set', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const res = await call(server, 'GET', '/metrics');
    assert.equal(res.status, 404);
    assert.equal(res.json.code, 'not_found');
    assert.doesNotMatch(res.text, /petstore_/);
  });

  test('METRICS_TOKEN restricts /metrics to requests bearing it', async (t) => {
    const server = await startTestServer({ metricsToken: token });
    t.after(() => server.close());
    const refused = await call(server, 'GET', '/metrics');
    assert.equal(refused.status, 401);
    assert.equal(refused.json.code, 'unauthorized');
    assert.match(refused.headers.get('www-authenticate')!, /^Bearer /);
    assert.equal((await call(server, 'GET', '/metrics', { key: 'wrong-token-0123456789' })).status, 401);
    const allowed = await call(server, 'GET', '/metrics', { key: token });
    assert.equal(allowed.status, 200);
    assert.match(allowed.text, /petstore_http_requests_total/);
    assert.equal(allowed.headers.get('cache-control'), 'no-store');
  });

  test('petstore_ready: 1 while storage answers, 0 once the server drains, as /readyz says', async (t) => {
    const server = await startTestServer({ metricsToken: token });
    t.after(() => server.close());
    assert.equal(sample(await metricsOf(server), 'petstore_ready', {}), 1);
    server.app.startDraining();
    assert.equal(sample(await metricsOf(server), 'petstore_ready', {}), 0);
    assert.equal((await call(server, 'GET', '/readyz')).status, 503);
  });

  test('answers written outside the router are counted as operation "unparsed"', async (t) => {
    const server = await startTestServer({ metricsToken: token });
    t.after(() => server.close());
    await call(server, 'GET', '/v1/pets/%zz');
    await exchange(server.url, 'NOT HTTP AT ALL\r\n\r\n');
    const text = await metricsOf(server);
    assert.equal(sample(text, 'petstore_http_requests_total', { operation: 'unparsed', status: '400' }), 2);
  });
});

describe('security headers and CORS', () => {
  test('nosniff and a deny-all CSP everywhere; no-store under /v1; no CORS headers by default', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const key = await server.key('free');
    for (const res of [
      await call(server, 'GET', '/v1/pets', { key }),
      await call(server, 'GET', '/v1/pets'),
      await call(server, 'GET', '/healthz'),
    ]) {
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(res.headers.get('content-security-policy'), "default-src 'none'; frame-ancestors 'none'");
    }
    assert.equal((await call(server, 'GET', '/v1/pets', { key })).headers.get('cache-control'), 'no-store');
    const cors = await call(server, 'GET', '/v1/pets', { key, headers: { origin: 'https://evil.example' } });
    assert.equal(cors.headers.get('access-control-allow-origin'), null);
  });

  test('CORS_ORIGINS: allowed origins get the headers and a preflight, others none', async (t) => {
    const server = await startTestServer({ corsOrigins: ['https://app.example.com'] });
    t.after(() => server.close());
    const key = await server.key('free');
    const allowed = await call(server, 'GET', '/v1/pets', { key, headers: { origin: 'https://app.example.com' } });
    assert.equal(allowed.headers.get('access-control-allow-origin'), 'https://app.example.com');
    assert.match(allowed.headers.get('access-control-expose-headers')!, /X-RateLimit-Remaining/);
    assert.match(allowed.headers.get('vary')!, /Origin/);
    const preflight = await fetch(`${server.url}/v1/pets`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    assert.equal(preflight.status, 204);
    assert.match(preflight.headers.get('access-control-allow-headers')!, /Authorization/);
    assert.match(preflight.headers.get('access-control-allow-methods')!, /POST/);
    const other = await call(server, 'GET', '/v1/pets', { key, headers: { origin: 'https://evil.example' } });
    assert.equal(other.headers.get('access-control-allow-origin'), null);
  });
});

test('a path that is not valid percent-encoding still gets a request id and nosniff', async (t) => {
  const server = await startTestServer();
  t.after(() => server.close());
  const res = await call(server, 'GET', '/v1/pets/%zz');
  assert.equal(res.status, 400);
  assert.match(res.headers.get('x-request-id')!, UUID);
  assert.equal(res.json.requestId, res.headers.get('x-request-id'));
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(res.headers.get('content-security-policy'), "default-src 'none'; frame-ancestors 'none'");
  assert.equal(res.headers.get('cache-control'), 'no-store');
});
