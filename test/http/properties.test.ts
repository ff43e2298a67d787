/**
 * Properties of the HTTP layer under arbitrary input, checked with fast-check against a live server
 * over raw sockets (so any bytes can be sent: control characters, non-ASCII, repeated and oversized
 * headers, unknown methods):
 *  - never a 5xx;
 *  - every error is in the Error shape, with `status` equal to the HTTP status;
 *  - every answer under /v1 carries the rate-limit headers, except the documented cases that are
 *    refused before any key or address is charged (a malformed request, a path with invalid
 *    percent-encoding, CONNECT, which Node hands over before routing);
 *  - nothing is stored unless a 201 was answered;
 *  - valid pets are always accepted and read back exactly as sent.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { requestBytes, sendRaw, type RawAnswer } from '../support/raw-http.ts';
import { startTestServer, storedCount } from '../support/servers.ts';

/** A request that leaves the server waiting for more (a Content-Length it never gets) ends in 408 within these. */
const TIMEOUTS = { headersTimeoutMs: 2000, requestTimeoutMs: 5000 };

function assertWellFormed(answer: RawAnswer, method: string, target: string, label: string): void {
  assert.ok(answer.status < 500, `5xx: ${label} -> ${answer.status} ${answer.body}`);
  if (answer.status >= 400 && method !== 'HEAD') {
    let body: any;
    try {
      body = JSON.parse(answer.body);
    } catch {
      assert.fail(`error without a JSON body: ${label} -> ${answer.status} ${answer.body.slice(0, 200)}`);
    }
    assert.equal(body.status, answer.status, label);
    assert.ok(Buffer.byteLength(answer.body, 'latin1') < 4096, `an error body of ${answer.body.length} bytes: ${label}`);
    assert.ok(!body.details || body.details.length <= 10, `${body.details?.length} details: ${label}`);
    assert.equal(typeof body.code, 'string', label);
    assert.ok(typeof body.message === 'string' && body.message.length > 0, label);
  }
  // Answers written before routing (malformed HTTP, oversized headers, a bad path, CONNECT) carry the
  // address's headers too.
  const isUnderV1 = /^(?:[a-z]+:\/\/[^/?#]*)?\/v1(\/|\?|$)/i.test(target);
  if (isUnderV1) {
    for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit', 'ratelimit-policy']) {
      assert.ok(h in answer.headers, `no ${h}: ${label} -> ${answer.status} ${answer.body.slice(0, 120)}`);
    }
  }
}

/** fc.assert, with the failing assertion's own message in the report (it travels as the cause). */
async function check(property: fc.IAsyncProperty<any>, params: fc.Parameters<any>): Promise<void> {
  try {
    await fc.assert(property, params);
  } catch (err) {
    const cause = (err as { cause?: Error }).cause;
    throw new Error(`${(err as Error).message}\n${cause?.message ?? ''}`, { cause: err });
  }
}

// ------------------------------------------------------------------------------------------------
// Generators

const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/);
const anyText = (maxLength: number) => fc.string({ unit: 'binary', maxLength });
const headerValue = fc.oneof(
  anyText(40).map((s) => s.replace(/[\r\n]/g, '')), // non-ASCII and control characters, but no line breaks
  fc.constant('x'.repeat(20_000)), // oversized
  fc.string({ unit: 'binary-ascii', maxLength: 40 }).map((s) => s.replace(/[\r\n]/g, '')),
);
const pathSegment = fc.oneof(
  fc.constantFrom(
    'pets',
    '1',
    '0',
    '-1',
    '9223372036854775807',
    '9223372036854775808',
    '%',
    '%zz',
    '%00',
    '..',
    '',
    'pets%2F1',
    '%E2%82%AC',
  ),
  anyText(10).map(encodeURIComponent),
  fc.string({ unit: 'binary-ascii', maxLength: 10 }).map((s) => s.replace(/[\s#?]/g, '')),
);
const target = fc
  .record({
    segments: fc.array(pathSegment, { maxLength: 3 }),
    query: fc.oneof(
      fc.constant(''),
      fc.string({ unit: 'binary-ascii', maxLength: 30 }).map((q) => '?' + q.replace(/[\s#]/g, '')),
      anyText(20).map((q) => '?limit=' + encodeURIComponent(q)),
    ),
    root: fc.constantFrom('/v1/pets', '/v1', '/v1/pets/', '/', '/v2'),
  })
  .map(({ root, segments, query }) => (segments.length ? `${root.replace(/\/$/, '')}/${segments.join('/')}` : root) + query)
  // The absolute form (`GET http://host/v1/pets`) must be held to the same rules as the origin form.
  .chain((path) => fc.constantFrom(path, `http://example.com${path}`, `HTTP://localhost:8080${path}`));
const method = fc.oneof(fc.constantFrom('GET', 'POST', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'), token);
const contentType = fc.oneof(
  fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'application/json; charset=latin1',
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/JSON',
    '',
  ),
  anyText(20).map((s) => s.replace(/[\r\n]/g, '')),
);
const body = fc.oneof(
  fc.json().map((s) => Buffer.from(s)),
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify({ name: v, categoryId: v }))),
  fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
  anyText(200).map((s) => Buffer.from(s)),
  fc.constant(Buffer.alloc(70 * 1024, 'a')),
);

test('arbitrary requests: never a 5xx, errors in the Error shape, rate-limit headers under /v1, nothing stored without a 201', async (t) => {
  const server = await startTestServer(TIMEOUTS);
  t.after(() => server.close());
  const key = await server.key('enterprise', { rpm: 1_000_000, rpd: 10_000_000 });
  const authorization = fc.oneof(
    fc.constant<[string, string][]>([['Authorization', `Bearer ${key}`]]),
    fc.constant<[string, string][]>([]),
    headerValue.map((v) => [['Authorization', v]] as [string, string][]),
  );
  const extraHeaders = fc.array(
    fc.tuple(
      fc.oneof(token, fc.constantFrom('Content-Type', 'Authorization', 'X-Forwarded-For', 'Accept', 'Cookie', 'Expect')),
      headerValue,
    ),
    { maxLength: 4 },
  );

  let stored = await storedCount(server);
  await check(
    fc.asyncProperty(
      method,
      target,
      authorization,
      extraHeaders,
      fc.option(contentType),
      fc.option(body),
      async (m, path, auth, extra, type, payload) => {
        const headers: [string, string][] = [...auth, ...extra];
        if (type !== null) headers.push(['Content-Type', type]);
        const label = `${m} ${path} ${JSON.stringify(headers).slice(0, 300)} body ${payload?.length ?? 0} bytes`;
        const answer = await sendRaw(server.url, requestBytes(m, path, headers, payload ?? undefined));
        assertWellFormed(answer, m, path, label);
        const now = await storedCount(server);
        assert.equal(now, stored + (answer.status === 201 ? 1 : 0), `stored ${now - stored} pets after ${answer.status}: ${label}`);
        stored = now;
      },
    ),
    { numRuns: 400 },
  );
});

test('POST bodies of every kind: a pet is stored exactly when 201 is answered, and read back as answered', async (t) => {
  const server = await startTestServer(TIMEOUTS);
  t.after(() => server.close());
  const key = await server.key('enterprise', { rpm: 1_000_000, rpd: 10_000_000 });
  let stored = await storedCount(server);
  await check(
    fc.asyncProperty(fc.option(contentType), body, async (type, payload) => {
      const headers: [string, string][] = [['Authorization', `Bearer ${key}`]];
      if (type !== null) headers.push(['Content-Type', type]);
      const answer = await sendRaw(server.url, requestBytes('POST', '/v1/pets', headers, payload));
      const label = `POST ${type} ${payload.toString('utf8').slice(0, 200)}`;
      assertWellFormed(answer, 'POST', '/v1/pets', label);
      const now = await storedCount(server);
      assert.equal(now, stored + (answer.status === 201 ? 1 : 0), label);
      stored = now;
      if (answer.status === 201) {
        const again = await sendRaw(server.url, requestBytes('GET', answer.headers.location!, headers));
        assert.equal(again.body, answer.body, label);
      }
    }),
    { numRuns: 300 },
  );
});

test('valid pets are always accepted and read back exactly, names of any Unicode and ids up to 2^63-1', async (t) => {
  const server = await startTestServer(TIMEOUTS);
  t.after(() => server.close());
  const key = await server.key('enterprise', { rpm: 1_000_000, rpd: 10_000_000 });
  const name = fc.string({ unit: 'binary', minLength: 1, maxLength: 100 }).filter((s) => !s.includes('\u0000') && /\S/u.test(s));
  const pet = fc.record({
    name,
    categoryId: fc.oneof(fc.bigInt({ min: 1n, max: 9223372036854775807n }), fc.constantFrom(1n, 9223372036854775807n, 2n ** 53n + 1n)),
    status: fc.option(fc.constantFrom('available', 'pending', 'sold'), { nil: undefined }),
  });
  await check(
    fc.asyncProperty(pet, async (p) => {
      // categoryId as an exact JSON integer literal, beyond what a double holds.
      const text = `{"name":${JSON.stringify(p.name)},"categoryId":${p.categoryId}${p.status ? `,"status":"${p.status}"` : ''}}`;
      const headers: [string, string][] = [
        ['Authorization', `Bearer ${key}`],
        ['Content-Type', 'application/json'],
      ];
      const created = await sendRaw(server.url, requestBytes('POST', '/v1/pets', headers, Buffer.from(text)));
      assert.equal(created.status, 201, `${text} -> ${created.body}`);
      const read = await sendRaw(server.url, requestBytes('GET', created.headers.location!, headers));
      assert.equal(read.status, 200);
      const id = /"id":(\d+)/.exec(read.body)![1];
      assert.equal(
        read.body,
        `{"id":${id},"name":${JSON.stringify(p.name)},"categoryId":${p.categoryId},"status":"${p.status ?? 'available'}"}`,
      );
    }),
    { numRuns: 300 },
  );
});

test('CONNECT, with or without a body or oversized headers, is answered 405 in the Error shape', async (t) => {
  const server = await startTestServer(TIMEOUTS);
  t.after(() => server.close());
  for (const [headers, body] of [
    [[], undefined],
    [[['Content-Type', 'text/plain']], Buffer.from('hello')],
    [[['Authorization', 'Bearer nope']], undefined],
  ] as [[string, string][], Buffer | undefined][]) {
    const answer = await sendRaw(server.url, requestBytes('CONNECT', '/v1/pets', headers, body));
    assert.equal(answer.status, 405);
    assert.deepEqual([JSON.parse(answer.body).code, JSON.parse(answer.body).status], ['method_not_allowed', 405]);
    assert.equal(answer.headers.allow, 'GET, HEAD, POST, OPTIONS');
  }
  assert.equal((await sendRaw(server.url, requestBytes('GET', '/healthz', []))).status, 200);
});

test('a CONNECT followed by more bytes does not keep the server from closing', async () => {
  const server = await startTestServer(TIMEOUTS);
  // The socket leaves the HTTP server with CONNECT; unread bytes after the request used to hold it
  // open, and with it every later close of the server.
  const answer = await sendRaw(server.url, requestBytes('CONNECT', 'example.com:443', [], Buffer.alloc(70 * 1024, 'x')));
  assert.equal(answer.status, 405);
  const closed = await Promise.race([server.close().then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5000))]);
  assert.ok(closed, 'the server did not finish closing within 5 s');
});
