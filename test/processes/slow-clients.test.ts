/**
 * Slow and abusive clients against the real server process, configured through its environment
 * (HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS, MAX_CONNECTIONS), over raw sockets:
 *  - slowloris connections (dribbling header lines, or silent) do not delay ordinary requests and are
 *    cut once the headers timeout passes, answered 408 in the Error shape;
 *  - a body trickling in slower than the request timeout is answered 408 in the Error shape and the
 *    connection closed (the request cannot go on: its body stream is cut), and nothing is stored;
 *  - oversized headers are answered 431 in the Error shape;
 *  - connections beyond MAX_CONNECTIONS are closed at once while those inside the cap keep working,
 *    and slow connections filling the cap hold it for no longer than the headers timeout;
 *  - an idle kept-alive connection is closed after the keep-alive timeout it advertises.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Socket } from 'node:net';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { startServerProcess, unlimitedKey, type ServerProcess } from '../support/processes.ts';
import { nextAnswer, openSocket, parseAnswer, request, untilClosed, type Conversation } from '../support/raw-http.ts';
import { atEnd, tempDir } from '../support/temp.ts';

/** A server process on a fresh SQLite file with the given settings, stopped and removed after the test. */
async function serve(t: TestContext, settings: Record<string, string>): Promise<{ server: ServerProcess; env: Record<string, string> }> {
  const env = { DATABASE_URL: `sqlite:${join(tempDir(t), 'petstore.db')}`, LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_MS: '0', ...settings };
  const server = await startServerProcess(env, { owner: t });
  return { server, env };
}

/** The Error shape (code, message, status) of a raw answer with the given status. */
function assertError(raw: string, status: number, code: string): void {
  const answer = parseAnswer(raw);
  assert.equal(answer.status, status, raw);
  assert.match(answer.headers['content-type'] ?? '', /^application\/json/);
  const body = JSON.parse(answer.body);
  assert.equal(body.code, code);
  assert.equal(body.status, status);
  assert.equal(typeof body.message, 'string');
}

/** Opens count connections that send a partial request and then a header line every 200 ms. */
async function slowloris(
  url: string,
  count: number,
): Promise<{ sockets: Socket[]; ends: Promise<Conversation>[]; openedAt: number; stop(): void }> {
  const openedAt = Date.now();
  const sockets = await Promise.all(Array.from({ length: count }, () => openSocket(url)));
  const ends = sockets.map(untilClosed);
  for (const s of sockets) s.write('GET /v1/pets HTTP/1.1\r\nHost: x\r\n');
  const dribble = setInterval(() => {
    for (const s of sockets) if (!s.destroyed) s.write('X-Slow: a\r\n');
  }, 200);
  return {
    sockets,
    ends,
    openedAt,
    stop() {
      clearInterval(dribble);
      for (const s of sockets) s.destroy();
    },
  };
}

test('slowloris connections do not delay ordinary requests and are cut with 408 once the headers timeout passes', async (t) => {
  const { server, env } = await serve(t, { HEADERS_TIMEOUT_MS: '2000', REQUEST_TIMEOUT_MS: '4000' });
  const key = await unlimitedKey(env);
  const dribblers = await slowloris(server.url, 40);
  const silent = await Promise.all(Array.from({ length: 10 }, () => openSocket(server.url)));
  const silentEnds = silent.map(untilClosed);
  atEnd(t, () => {
    dribblers.stop();
    for (const s of silent) s.destroy();
  });

  const latencies: number[] = [];
  for (let i = 0; i < 10; i++) {
    const started = Date.now();
    const res = await request(`${server.url}/v1/pets?limit=5`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    latencies.push(Date.now() - started);
  }
  const servedAt = Date.now();

  const closed = await Promise.race([Promise.all([...dribblers.ends, ...silentEnds]), sleep(15_000).then(() => undefined)]);
  assert.ok(closed, 'slow connections were still open 15 s later');
  const closedAfter = closed.map((c) => c.closedAt - dribblers.openedAt);
  assert.equal(closedAfter.length, 50, 'every slow connection is in the bounds below (Math.min() of nothing is Infinity)');
  // Ordinary requests did not wait for the slow connections to go.
  assert.ok(servedAt < Math.min(...closed.map((c) => c.closedAt)), 'ordinary requests finished only after the slow connections were cut');
  // Node checks the timeouts every tenth of the shorter one; the rest of the bound is for a loaded machine.
  assert.ok(Math.min(...closedAfter) >= 1900, `a slow connection was cut after ${Math.min(...closedAfter)} ms`);
  assert.ok(Math.max(...closedAfter) < 7000, `a slow connection was cut only after ${Math.max(...closedAfter)} ms`);
  for (const { text } of closed.slice(0, dribblers.sockets.length)) assertError(text, 408, 'request_timeout');
  for (const { text } of closed.slice(dribblers.sockets.length)) if (text) assertError(text, 408, 'request_timeout');
  console.log(
    `# slowloris: ordinary requests took ${Math.max(...latencies)} ms at most; 50 slow connections cut ` +
      `${Math.min(...closedAfter)}-${Math.max(...closedAfter)} ms after opening (HEADERS_TIMEOUT_MS 2000)`,
  );
});

test('a body trickling in slower than the request timeout is answered 408 in the Error shape, then the connection closes; nothing is stored', async (t) => {
  const { server, env } = await serve(t, { HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '2000' });
  const key = await unlimitedKey(env);
  const socket = await openSocket(server.url);
  const end = untilClosed(socket);
  const body = JSON.stringify({ name: 'Trickle', categoryId: 1 });
  const started = Date.now();
  socket.write(
    `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  let sent = 0;
  // One byte every 250 ms: the whole body would need about 7 s.
  const trickle = setInterval(() => {
    if (sent < body.length && !socket.destroyed) socket.write(body[sent++]!);
  }, 250);
  atEnd(t, () => {
    clearInterval(trickle);
    socket.destroy();
  });
  const { text, closedAt } = await end;
  assertError(text, 408, 'request_timeout');
  assert.equal(parseAnswer(text).headers.connection, 'close');
  assert.ok(sent < body.length, 'the body was never complete');
  assert.ok(closedAt - started >= 1900 && closedAt - started < 7000, `answered after ${closedAt - started} ms`);

  const list = await request(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(list.status, 200);
  assert.deepEqual(JSON.parse(list.body), []);
});

test('oversized headers are answered 431 in the Error shape, one huge header or many small ones', async (t) => {
  const { server } = await serve(t, {});
  const oneHuge = `X-Big: ${'a'.repeat(20 * 1024)}\r\n`;
  const manySmall = Array.from({ length: 400 }, (_, i) => `X-Small-${i}: ${'b'.repeat(40)}\r\n`).join('');
  for (const headers of [oneHuge, manySmall]) {
    const socket = await openSocket(server.url);
    const end = untilClosed(socket);
    socket.write(`GET /v1/pets HTTP/1.1\r\nHost: x\r\n${headers}\r\n`);
    const { text } = await end;
    assertError(text, 431, 'request_header_fields_too_large');
  }
  // The server is unharmed.
  assert.equal((await request(`${server.url}/healthz`, {})).status, 200);
});

test('beyond MAX_CONNECTIONS connections are closed at once; those inside keep working; slow ones hold the cap only until the headers timeout', async (t) => {
  // All from one address: the per-address cap (a quarter of the total by default) is off here.
  const { server } = await serve(t, {
    MAX_CONNECTIONS: '10',
    MAX_CONNECTIONS_PER_ADDRESS: '0',
    HEADERS_TIMEOUT_MS: '2000',
    REQUEST_TIMEOUT_MS: '4000',
  });
  // One ordinary kept-alive connection and nine slow ones fill the cap.
  const kept = await openSocket(server.url);
  atEnd(t, () => kept.destroy());
  const first = nextAnswer(kept);
  kept.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.equal((await first).status, 200);
  const slow = await slowloris(server.url, 9);
  atEnd(t, () => slow.stop());
  await sleep(200);

  const extra = await openSocket(server.url);
  const extraEnd = await untilClosed(extra);
  assert.equal(extraEnd.text, '', 'the connection over the cap was closed without an answer');
  await assert.rejects(request(`${server.url}/healthz`, {}), /ECONNRESET|socket hang up/);

  const again = nextAnswer(kept);
  kept.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.equal((await again).status, 200, 'a connection inside the cap is still served');

  // Once the headers timeout has cut the slow connections, new ones are accepted again.
  await Promise.all(slow.ends);
  assert.ok(Date.now() - slow.openedAt < 7000, `the slow connections held the cap for ${Date.now() - slow.openedAt} ms`);
  assert.equal((await request(`${server.url}/healthz`, {})).status, 200);
});

test('an idle kept-alive connection is closed after KEEP_ALIVE_TIMEOUT_MS, which the answer advertises', async (t) => {
  const { server } = await serve(t, { KEEP_ALIVE_TIMEOUT_MS: '1000' });
  const socket = await openSocket(server.url);
  atEnd(t, () => socket.destroy());
  const answer = nextAnswer(socket);
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  const { status, headers } = await answer;
  const answeredAt = Date.now();
  assert.equal(status, 200);
  assert.equal(headers['keep-alive'], 'timeout=1');
  const { text, closedAt } = await untilClosed(socket);
  assert.equal(text, '');
  // Node waits a little past the advertised timeout, so a client reusing the connection at the last
  // moment does not race the close.
  assert.ok(closedAt - answeredAt >= 950 && closedAt - answeredAt < 6000, `closed ${closedAt - answeredAt} ms after the answer`);
});

test('KEEP_ALIVE_TIMEOUT_MS: 72 s by default, longer than the usual proxy idle timeout; bad values are refused by name', () => {
  assert.equal(loadConfig({}).keepAliveTimeoutMs, 72_000);
  assert.equal(loadConfig({ KEEP_ALIVE_TIMEOUT_MS: '5000' }).keepAliveTimeoutMs, 5000);
  for (const bad of ['999', '600001', '1e4', 'soon']) {
    assert.throws(
      () => loadConfig({ KEEP_ALIVE_TIMEOUT_MS: bad }),
      (err: Error) => err instanceof ConfigError && err.message.startsWith('KEEP_ALIVE_TIMEOUT_MS'),
    );
  }
});
