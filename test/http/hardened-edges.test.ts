/**
 * The edges a hostile or careless client reaches, through real HTTP on raw sockets:
 *  - a refused request's body is never read: a large or unsized one ends the connection at once,
 *    and `Expect: 100-continue` is answered 100 only once the request is admitted;
 *  - one address cannot hold every connection, and keep-alive shortens near the total cap;
 *  - error bodies stay small whatever the request held;
 *  - requests Node would answer itself (no Host) get the Error shape, a request id, a log line;
 *  - what makes a request an API request is its route: a percent-encoded /v1 is one;
 *  - /metrics on a private listener of its own (METRICS_PORT).
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { afterEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, startServerProcess } from '../support/processes.ts';
import { nextAnswer, openSocket, parseAnswer, untilClosed } from '../support/raw-http.ts';
import { call, startTestServer, type TestServer } from '../support/servers.ts';
import { tempDir, undoAll } from '../support/temp.ts';

/** Bytes the server read from each connection it accepted, once that connection has closed. */
function countBytesRead(server: TestServer): { bytesRead: number[]; closed(count: number): Promise<void> } {
  const bytesRead: number[] = [];
  server.app.server.on('connection', (socket: Socket) => socket.once('close', () => bytesRead.push(socket.bytesRead)));
  return {
    bytesRead,
    async closed(count) {
      for (let i = 0; i < 200 && bytesRead.length < count; i++) await sleep(10);
      assert.equal(bytesRead.length, count, 'the server closed its side');
    },
  };
}

/**
 * Sends a request head declaring a body of `declared` bytes, then streams zeros as fast as the
 * connection takes them until the server closes it. Resolves with the first answer, when it came,
 * and when the connection closed.
 */
async function streamUntilClosed(
  socket: Socket,
  head: string,
): Promise<{ answer: string; answeredAt: number; closedAt: number; written: number }> {
  const chunk = Buffer.alloc(64 * 1024);
  let written = 0;
  let answer = '';
  let answeredAt = 0;
  socket.on('data', (data: Buffer) => {
    answer += data.toString('latin1');
    if (!answeredAt && answer.includes('\r\n\r\n')) answeredAt = Date.now();
  });
  socket.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
  socket.write(head);
  let open = true;
  void closed.then(() => (open = false));
  const pump = async () => {
    while (open) {
      if (!socket.write(chunk)) await sleep(1);
      written += chunk.length;
      // Yield now and then so the answer and the close are seen.
      if (written % (1024 * 1024) === 0) await new Promise((r) => setImmediate(r));
    }
  };
  void pump();
  const closedAt = await closed;
  return { answer, answeredAt, closedAt, written };
}

const HUNDRED_GB = '100000000000';

describe('refused requests cost nothing', () => {
  test('a keyless POST declaring 100 GB is answered 401 with Connection: close and closed within 1 s, its body unread', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const seen = countBytesRead(server);
    const socket = await openSocket(server.url);
    const result = await streamUntilClosed(
      socket,
      `POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${HUNDRED_GB}\r\n\r\n`,
    );
    const answer = parseAnswer(result.answer);
    assert.equal(answer.status, 401, JSON.stringify(result));
    assert.equal(answer.headers.connection, 'close');
    assert.equal(JSON.parse(answer.body).code, 'unauthorized');
    assert.ok(result.closedAt - result.answeredAt < 1000, `closed ${result.closedAt - result.answeredAt} ms after the 401`);
    await seen.closed(1);
    const read = seen.bytesRead[0]!;
    assert.ok(read < 4 * 1024 * 1024, `the server read ${read} bytes of a refused body`);
    t.diagnostic(
      `401: closed ${result.closedAt - result.answeredAt} ms after the answer; server read ${read} bytes, the client wrote ${result.written}`,
    );
  });

  test('the same after a 429, and for a chunked body of unknown length', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const key = await server.key('enterprise', { rpm: 1, rpd: 1000 });
    assert.equal((await call(server, 'GET', '/v1/pets', { key })).status, 200);
    const seen = countBytesRead(server);
    for (const framing of [`Content-Length: ${HUNDRED_GB}`, 'Transfer-Encoding: chunked']) {
      const socket = await openSocket(server.url);
      // A chunked stream: one chunk header announcing a huge chunk, then the zeros.
      const head = `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n${framing}\r\n\r\n${framing.startsWith('Transfer') ? 'ffffffffff\r\n' : ''}`;
      const result = await streamUntilClosed(socket, head);
      const answer = parseAnswer(result.answer);
      assert.equal(answer.status, 429, framing);
      assert.equal(answer.headers.connection, 'close', framing);
      assert.ok(result.closedAt - result.answeredAt < 1000, `${framing}: closed ${result.closedAt - result.answeredAt} ms after the 429`);
    }
    await seen.closed(2);
    for (const read of seen.bytesRead) assert.ok(read < 4 * 1024 * 1024, `the server read ${read} bytes of a refused body`);
    t.diagnostic(`429: server read ${seen.bytesRead.join(', ')} bytes`);
  });

  test('a body declared beyond 64 KiB is a 413 without being read, for a valid key too', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const key = await server.key('free');
    const seen = countBytesRead(server);
    const socket = await openSocket(server.url);
    const result = await streamUntilClosed(
      socket,
      `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${HUNDRED_GB}\r\n\r\n`,
    );
    const answer = parseAnswer(result.answer);
    assert.equal(answer.status, 413);
    assert.equal(answer.headers.connection, 'close');
    assert.ok(result.closedAt - result.answeredAt < 1000);
    await seen.closed(1);
    assert.ok(seen.bytesRead[0]! < 4 * 1024 * 1024, `the server read ${seen.bytesRead[0]} bytes`);
  });

  test('a small refused body is discarded and the connection kept', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const socket = await openSocket(server.url);
    t.after(() => socket.destroy());
    const body = JSON.stringify({ name: 'x'.repeat(1000), categoryId: 1 });
    const request = `POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    socket.write(request);
    const first = await nextAnswer(socket);
    assert.equal(first.status, 401);
    assert.notEqual(first.headers.connection, 'close');
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal((await nextAnswer(socket)).status, 200, 'the same connection serves the next request');
  });

  test('Expect: 100-continue: a refused request gets its final answer and never a 100; an admitted one gets 100, then 201', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const key = await server.key('free');
    const body = JSON.stringify({ name: 'Expecting', categoryId: 1 });
    const head = (auth: string) =>
      `POST /v1/pets HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`;

    const refused = await openSocket(server.url);
    refused.write(head(''));
    const refusal = await nextAnswer(refused);
    assert.equal(refusal.status, 401, 'the final answer comes first, without a 100');
    refused.destroy();

    const admitted = await openSocket(server.url);
    t.after(() => admitted.destroy());
    let seen = '';
    admitted.on('data', (d: Buffer) => (seen += d.toString('latin1')));
    admitted.write(head(`Authorization: Bearer ${key}\r\n`));
    for (let i = 0; i < 100 && !seen.includes('\r\n\r\n'); i++) await sleep(10);
    assert.match(seen, /^HTTP\/1\.1 100 Continue\r\n\r\n$/, 'asked for the body once admitted');
    admitted.write(body);
    for (let i = 0; i < 200 && !/\r\n\r\n[\s\S]*\}$/.test(seen.slice(25)); i++) await sleep(10);
    assert.equal(parseAnswer(seen.slice('HTTP/1.1 100 Continue\r\n\r\n'.length)).status, 201);
  });
});

describe('connection fairness', () => {
  // Client sockets are closed before their server: on Node 22 a server's close waits for connections
  // that never sent a request.
  const clients: Socket[] = [];
  const servers: TestServer[] = [];
  afterEach(async () => {
    clients.splice(0).forEach((s) => s.destroy());
    await undoAll(servers.splice(0).map((server) => () => server.close()));
  });
  const track = (...sockets: Socket[]) => (clients.push(...sockets), sockets);
  const serve = async (config: Parameters<typeof startTestServer>[0]) => {
    const server = await startTestServer(config);
    servers.push(server);
    return server;
  };

  test('one address beyond MAX_CONNECTIONS_PER_ADDRESS is cut at once; another address is still served', async (t) => {
    const server = await serve({ maxConnections: 40, maxConnectionsPerAddress: 10 });
    const hog = track(...(await Promise.all(Array.from({ length: 30 }, () => openSocket(server.url, { localAddress: '127.0.0.2' })))));
    const closes = hog.map((s) => Promise.race([untilClosed(s).then(() => 'closed'), sleep(500, 'open')]));
    const states = await Promise.all(closes);
    assert.equal(states.filter((s) => s === 'open').length, 10, 'the cap holds ten open');
    assert.equal(states.filter((s) => s === 'closed').length, 20, 'the rest are closed as they arrive');

    const [other] = track(await openSocket(server.url, { localAddress: '127.0.0.3' }));
    other!.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    const startedAt = Date.now();
    assert.equal((await nextAnswer(other!)).status, 200);
    t.diagnostic(`another address answered in ${Date.now() - startedAt} ms while the first held its 10`);

    // A held connection of the capped address still works, and a slot frees when one closes.
    const held = hog.filter((_s, i) => states[i] === 'open');
    held[0]!.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal((await nextAnswer(held[0]!)).status, 200);
    held[1]!.destroy();
    await sleep(50);
    const [again] = track(await openSocket(server.url, { localAddress: '127.0.0.2' }));
    again!.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal((await nextAnswer(again!)).status, 200);
  });

  test('near MAX_CONNECTIONS, answers keep their connection alive for 2 s only', async () => {
    const server = await serve({ maxConnections: 10, maxConnectionsPerAddress: 0 });
    const [first] = track(await openSocket(server.url));
    first!.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal((await nextAnswer(first!)).headers['keep-alive'], 'timeout=72');
    track(...(await Promise.all(Array.from({ length: 8 }, () => openSocket(server.url)))));
    await sleep(50);
    first!.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal((await nextAnswer(first!)).headers['keep-alive'], 'timeout=2');
  });
});

describe('error bodies stay small', () => {
  test('8,000 unknown fields are refused before validation; at most 10 details; under 4 KiB; a 60 KB field name is clipped', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const key = await server.key('free');
    // About 64 KiB: the largest body accepted.
    const fields = Object.fromEntries(Array.from({ length: 8000 }, (_v, i) => [i.toString(36), 0]));
    const many = await call(server, 'POST', '/v1/pets', { key, body: { name: 'a', categoryId: 1, ...fields } });
    assert.equal(many.status, 400);
    assert.match(many.json.message, /has 8002 fields; at most 64/);
    assert.ok(Buffer.byteLength(many.text) < 4096, `${Buffer.byteLength(many.text)} bytes`);
    // Within 64 fields, each unknown one is a schema error: ten are listed, the message counts the rest.
    const sixty = Object.fromEntries(Array.from({ length: 60 }, (_v, i) => [`unknown${i}`, 0]));
    const listed = await call(server, 'POST', '/v1/pets', { key, body: { name: 'a', categoryId: 1, ...sixty } });
    assert.equal(listed.status, 400);
    assert.equal(listed.json.details.length, 10);
    assert.match(listed.json.message, /and 57 more; the first 10 are in details/);

    const longName = 'n'.repeat(60_000);
    const long = await call(server, 'POST', '/v1/pets', { key, body: `{"name":"a","categoryId":1,"${longName}":1}` });
    assert.equal(long.status, 400);
    assert.ok(Buffer.byteLength(long.text) < 4096, `${Buffer.byteLength(long.text)} bytes`);
    assert.ok(!long.text.includes('n'.repeat(100)), 'the name is not echoed whole');

    // Control characters need six bytes each in JSON: still under 4 KiB.
    const controls = Object.fromEntries(Array.from({ length: 10 }, (_v, i) => [`${'\u0001'.repeat(1000)}${i}`, 0]));
    const escaped = await call(server, 'POST', '/v1/pets', { key, body: { name: 'a', categoryId: 1, ...controls } });
    assert.equal(escaped.status, 400);
    assert.ok(Buffer.byteLength(escaped.text) < 4096, `${Buffer.byteLength(escaped.text)} bytes`);

    const path = `/v1/${'p'.repeat(8000)}`;
    const notFound = await call(server, 'GET', path, { key });
    assert.equal(notFound.status, 404);
    assert.ok(Buffer.byteLength(notFound.text) < 4096);
    t.diagnostic(
      `error body sizes: 8,000 fields ${Buffer.byteLength(many.text)} B, 60 KB name ${Buffer.byteLength(long.text)} B, control characters ${Buffer.byteLength(escaped.text)} B, 8 KB path ${Buffer.byteLength(notFound.text)} B`,
    );
  });
});

describe('answers Node would write itself', () => {
  test('an HTTP/1.1 request without Host, or with two: 400 in the Error shape with a request id, logged and counted', async (t) => {
    const lines: string[] = [];
    const token = 'metrics-token-0123456789';
    const server = await startTestServer({ logLevel: 'info', metricsToken: token }, { onLog: (l) => lines.push(l) });
    t.after(() => server.close());
    const socket = await openSocket(server.url);
    t.after(() => socket.destroy());
    socket.write('GET /v1/pets HTTP/1.1\r\n\r\n');
    const answer = await nextAnswer(socket);
    assert.equal(answer.status, 400);
    const body = JSON.parse(answer.body);
    assert.equal(body.code, 'invalid_request');
    assert.match(body.message, /Host/);
    assert.equal(body.requestId, answer.headers['x-request-id']);
    assert.ok(
      lines.some((l) => l.includes(`"requestId":"${body.requestId}"`) && l.includes('"status":400')),
      'logged',
    );
    const metrics = (await call(server, 'GET', '/metrics', { key: token })).text;
    assert.match(metrics, /petstore_http_requests_total\{operation="listPets",status="400"\} 1/);
    // Two Host lines are as bad as none (RFC 9112 §3.2); Node alone would keep the first.
    const twice = await openSocket(server.url);
    t.after(() => twice.destroy());
    twice.write('GET /v1/pets HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n');
    const doubled = await nextAnswer(twice);
    assert.equal(doubled.status, 400);
    assert.match(JSON.parse(doubled.body).message, /one Host header/);
    // HTTP/1.0 needs no Host.
    const old = await openSocket(server.url);
    t.after(() => old.destroy());
    old.write('GET /healthz HTTP/1.0\r\n\r\n');
    assert.equal((await nextAnswer(old)).status, 200);
  });
});

describe('an API request is one the API routes', () => {
  test('a percent-encoded /v1 is authenticated, limited and never cached, like /v1', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const key = await server.key('free');
    for (const path of ['/%76%31/pets', '/v%31/pets', '/%76%31/nothing-here']) {
      const keyless = await call(server, 'GET', path);
      assert.equal(keyless.status, 401, path);
      assert.equal(keyless.headers.get('cache-control'), 'no-store', path);
      assert.ok(keyless.headers.get('x-ratelimit-limit'), path);
      const keyed = await call(server, 'GET', path, { key });
      assert.equal(keyed.status, path.endsWith('pets') ? 200 : 404, path);
      assert.equal(keyed.headers.get('cache-control'), 'no-store', path);
      assert.equal(keyed.headers.get('x-ratelimit-limit'), '60', path);
    }
    // Outside the API nothing is charged or marked.
    const health = await call(server, 'GET', '/healthz');
    assert.equal(health.headers.get('x-ratelimit-limit'), null);
  });
});

describe('the private metrics listener', () => {
  test('METRICS_PORT serves /metrics on 127.0.0.1 without a token; the public listener does not serve it', async (t) => {
    const metricsPort = await freePort();
    const server = await startServerProcess(
      { DATABASE_URL: `sqlite:${tempDir(t)}/petstore.db`, METRICS_PORT: String(metricsPort) },
      { owner: t },
    );
    assert.equal((await fetch(`${server.url}/metrics`)).status, 404);
    const scraped = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    assert.equal(scraped.status, 200);
    assert.match(await scraped.text(), /petstore_http_requests_total/);
    const other = await fetch(`http://127.0.0.1:${metricsPort}/v1/pets`);
    assert.equal(other.status, 404);
    assert.equal(((await other.json()) as { code: string }).code, 'not_found');
  });
});
