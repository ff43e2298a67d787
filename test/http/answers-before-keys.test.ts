/**
 * Answers given before any key is read still carry the rate-limit headers, over raw sockets:
 *  - a slow header (408), a 20 KB header (431), a body without valid framing or a malformed request
 *    (400), no Host (400), a path that is not percent-encoded text (400) and CONNECT (405) carry the
 *    client address's, and count against it; past its limit they keep their status, with 0 left;
 *  - behind a trusted proxy, whose client is named in headers never read, the proxy's bucket is
 *    reported and not charged;
 *  - a body that stops coming after its request was admitted is answered 408 with the key's headers;
 *  - a connection that sends nothing is closed without an answer;
 *  - a CORS preflight carries the address's headers, is not counted, and is answered 204 even when
 *    the address has nothing left.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { proxyList } from '../../src/domain/addresses.ts';
import { openSocket, parseAnswer, sendRaw, untilClosed, type RawAnswer } from '../support/raw-http.ts';
import { startTestServer, type TestServer } from '../support/servers.ts';

const RATE_LIMIT_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit-policy', 'ratelimit'];

/** Short timeouts, so that slow requests are cut within a second or two. */
const TIMEOUTS = { headersTimeoutMs: 500, requestTimeoutMs: 1000 };

function assertRateLimitHeaders(answer: RawAnswer, label: string): void {
  for (const name of RATE_LIMIT_HEADERS) assert.ok(answer.headers[name], `${label}: no ${name} in\n${answer.head}`);
}

/** The per-address window as an answer reports it: `"minute";q=60;w=60`, and nothing of a key's day. */
function assertAddressWindow(answer: RawAnswer, perMinute: number, label: string): void {
  assert.equal(answer.headers['ratelimit-policy'], `"minute";q=${perMinute};w=60`, label);
  assert.equal(answer.headers['x-ratelimit-limit'], String(perMinute), label);
}

function assertError(answer: RawAnswer, status: number, code: string, label: string): void {
  assert.equal(answer.status, status, `${label}: ${answer.head}`);
  const body = JSON.parse(answer.body);
  assert.equal(body.code, code, label);
  assert.equal(body.status, status, label);
  assert.equal(body.requestId, answer.headers['x-request-id'], label);
}

/** What the address has left, read from a request without a key (which is itself counted). */
async function addressRemaining(server: TestServer): Promise<number> {
  const answer = await sendRaw(server.url, 'GET /v1/pets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.equal(answer.status, 401);
  return Number(answer.headers['x-ratelimit-remaining']);
}

/** How many requests `act` counted against the address, and its answer. */
async function countedBy(server: TestServer, act: () => Promise<RawAnswer>): Promise<{ counted: number; answer: RawAnswer }> {
  const before = await addressRemaining(server);
  const answer = await act();
  const after = await addressRemaining(server);
  return { counted: before - after - 1, answer };
}

const BIG_HEADER = `X-Big: ${'a'.repeat(20 * 1024)}\r\n`;

/** Requests answered before any key is read, each with the status and code it gets. */
const UNREAD: { label: string; bytes: string; status: number; code: string }[] = [
  {
    label: 'a 20 KB header',
    bytes: `GET /v1/pets HTTP/1.1\r\nHost: x\r\n${BIG_HEADER}\r\n`,
    status: 431,
    code: 'request_header_fields_too_large',
  },
  {
    label: 'both Content-Length and Transfer-Encoding',
    bytes: 'POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    status: 400,
    code: 'invalid_request',
  },
  { label: 'a malformed request line', bytes: 'GET /v1/pets HTTP/9.9.9\r\nHost: x\r\n\r\n', status: 400, code: 'invalid_request' },
  { label: 'no Host', bytes: 'GET /v1/pets HTTP/1.1\r\nConnection: close\r\n\r\n', status: 400, code: 'invalid_request' },
  {
    label: 'a path that is not percent-encoded text',
    bytes: 'GET /v1/%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    status: 400,
    code: 'invalid_request',
  },
  { label: 'CONNECT', bytes: 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', status: 405, code: 'method_not_allowed' },
];

describe('answers before any key is read carry the address’s rate-limit headers', () => {
  test('a slow header is answered 408 with them, and counted against the address', async (t) => {
    const server = await startTestServer(TIMEOUTS);
    t.after(() => server.close());
    const { counted, answer } = await countedBy(server, async () => {
      const socket = await openSocket(server.url);
      const end = untilClosed(socket);
      socket.write('GET /v1/pets HTTP/1.1\r\nHost: x\r\n'); // and never the blank line
      return parseAnswer((await end).text);
    });
    assertError(answer, 408, 'request_timeout', 'slow header');
    assertRateLimitHeaders(answer, 'slow header');
    assertAddressWindow(answer, 60, 'slow header');
    assert.equal(answer.headers.connection, 'close');
    assert.equal(counted, 1);
  });

  for (const { label, bytes, status, code } of UNREAD) {
    test(`${label}: ${status} with them, counted against the address`, async (t) => {
      const server = await startTestServer(TIMEOUTS);
      t.after(() => server.close());
      const { counted, answer } = await countedBy(server, () => sendRaw(server.url, bytes));
      assertError(answer, status, code, label);
      assertRateLimitHeaders(answer, label);
      assertAddressWindow(answer, 60, label);
      assert.equal(counted, 1, label);
    });
  }

  test('past the address’s limit they keep their status, with nothing left and nothing counted', async (t) => {
    const server = await startTestServer({ ...TIMEOUTS, anonymousPerMinute: 2 });
    t.after(() => server.close());
    assert.equal(await addressRemaining(server), 1);
    assert.equal(await addressRemaining(server), 0);
    const answer = await sendRaw(server.url, UNREAD[0]!.bytes);
    assertError(answer, 431, 'request_header_fields_too_large', 'spent address');
    assert.equal(answer.headers['x-ratelimit-remaining'], '0');
    assert.equal(answer.headers['retry-after'], undefined, 'not a 429');
    const refused = await sendRaw(server.url, 'GET /v1/pets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(refused.status, 429);
  });

  test('behind a trusted proxy the proxy’s bucket is reported, never charged: the client is in headers never read', async (t) => {
    const server = await startTestServer({ ...TIMEOUTS, trustProxy: { kind: 'addresses', proxies: proxyList(['loopback'])! } });
    t.after(() => server.close());
    for (const { label, bytes } of [UNREAD[0]!, UNREAD[2]!]) {
      const { counted, answer } = await countedBy(server, () => sendRaw(server.url, bytes));
      assertRateLimitHeaders(answer, label);
      assertAddressWindow(answer, 60, label);
      assert.equal(counted, 0, label);
    }
  });

  test('a body that stops coming after its request was admitted: 408 with the key’s headers, the key counted once', async (t) => {
    const server = await startTestServer(TIMEOUTS);
    t.after(() => server.close());
    const key = await server.key('pro');
    const { counted, answer } = await countedBy(server, async () => {
      const socket = await openSocket(server.url);
      const end = untilClosed(socket);
      socket.write(
        `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
          'Content-Length: 40\r\nX-Request-Id: slow-body-1\r\n\r\n{"name":',
      );
      return parseAnswer((await end).text);
    });
    assertError(answer, 408, 'request_timeout', 'slow body');
    assertRateLimitHeaders(answer, 'slow body');
    assert.equal(answer.headers['x-request-id'], 'slow-body-1', 'the request’s own id');
    assert.equal(answer.headers['ratelimit-policy'], '"minute";q=300;w=60, "day";q=10000;w=86400');
    assert.equal(answer.headers['x-ratelimit-remaining'], '299');
    assert.equal(counted, 0, 'the address is not counted');
    const next = await sendRaw(server.url, `GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);
    assert.equal(next.headers['x-ratelimit-remaining'], '298', 'the key was counted once, for its admission');
  });

  test('a body without valid framing: 400 with the headers of the key or address the guard charged, counted once', async (t) => {
    const server = await startTestServer(TIMEOUTS);
    t.after(() => server.close());
    // RFC 9112 section 6.3: a Transfer-Encoding that does not end in chunked leaves the body's length unknown.
    const unframed = (headers: string) =>
      `POST /v1/pets HTTP/1.1\r\nHost: x\r\n${headers}Content-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n{}`;
    const keyless = await countedBy(server, () => sendRaw(server.url, unframed('')));
    // The guard may refuse it (401) before the parser reaches the body (400): either way, once, with the address's headers.
    assert.ok([400, 401].includes(keyless.answer.status), keyless.answer.head);
    assertRateLimitHeaders(keyless.answer, 'keyless');
    assertAddressWindow(keyless.answer, 60, 'keyless');
    assert.equal(keyless.counted, 1);

    const key = await server.key('pro');
    const warm = await sendRaw(server.url, `GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);
    assert.equal(warm.headers['x-ratelimit-remaining'], '299');
    const keyed = await countedBy(server, () => sendRaw(server.url, unframed(`Authorization: Bearer ${key}\r\n`)));
    assertError(keyed.answer, 400, 'invalid_request', 'keyed');
    assert.equal(keyed.answer.headers['ratelimit-policy'], '"minute";q=300;w=60, "day";q=10000;w=86400', 'the key’s windows');
    assert.equal(keyed.answer.headers['x-ratelimit-remaining'], '298');
    assert.equal(keyed.counted, 0, 'the address is not counted');
  });

  test('a connection that sends nothing is closed without an answer once the headers timeout passes', async (t) => {
    const server = await startTestServer(TIMEOUTS);
    t.after(() => server.close());
    const socket = await openSocket(server.url);
    const opened = Date.now();
    const { text, closedAt } = await untilClosed(socket);
    assert.equal(text, '', 'no answer to a request that never came');
    assert.ok(closedAt - opened >= 400, `closed after ${closedAt - opened} ms`);
    assert.ok(closedAt - opened < 5000, `closed only after ${closedAt - opened} ms`);
  });
});

describe('CORS preflights', () => {
  const PREFLIGHT =
    'OPTIONS /v1/pets HTTP/1.1\r\nHost: x\r\nConnection: close\r\nOrigin: https://app.example\r\n' +
    'Access-Control-Request-Method: GET\r\nAccess-Control-Request-Headers: authorization\r\n\r\n';

  test('carry the address’s headers, are not counted, and are answered 204 even when the address has nothing left', async (t) => {
    const server = await startTestServer({ corsOrigins: ['https://app.example'], anonymousPerMinute: 3 });
    t.after(() => server.close());
    for (let i = 0; i < 5; i++) {
      const preflight = await sendRaw(server.url, PREFLIGHT);
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers['access-control-allow-origin'], 'https://app.example');
      assertRateLimitHeaders(preflight, 'preflight');
      assertAddressWindow(preflight, 3, 'preflight');
      assert.equal(preflight.headers['x-ratelimit-remaining'], '3', `preflight ${i + 1} was counted`);
    }
    for (let left = 2; left >= 0; left--) assert.equal(await addressRemaining(server), left);
    const spent = await sendRaw(server.url, PREFLIGHT);
    assert.equal(spent.status, 204, 'a refused preflight would fail the browser’s request unreadably');
    assert.equal(spent.headers['x-ratelimit-remaining'], '0');
    // The browser's real request is the one refused, with headers its page can read.
    const refused = await sendRaw(
      server.url,
      'GET /v1/pets HTTP/1.1\r\nHost: x\r\nConnection: close\r\nOrigin: https://app.example\r\nAuthorization: Bearer nope\r\n\r\n',
    );
    assert.equal(refused.status, 429);
    assert.equal(refused.headers['access-control-allow-origin'], 'https://app.example');
    assert.match(refused.headers['access-control-expose-headers'] ?? '', /Retry-After/);
    // An OPTIONS that is no preflight is counted, and refused, like any request.
    const plain = await sendRaw(server.url, 'OPTIONS /v1/pets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(plain.status, 429);
    assertRateLimitHeaders(plain, 'plain OPTIONS');
  });
});
