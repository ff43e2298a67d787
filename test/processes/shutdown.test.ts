/**
 * Graceful shutdown of the real server process. SIGTERM in the middle of load from a few dozen
 * keep-alive clients: every answer is 2xx, no request is reset (the only failures are connections
 * refused after the listener closed, counted apart), a create whose body is still arriving when the
 * listener closes completes with 201, the process exits 0 in time, and every 201 is in the database
 * when a new process reads it. Run on SQLite (creates are group-committed, so close must flush them)
 * and, when the test URLs are set, on PostgreSQL with Redis. Also: a client that never finishes its
 * request cannot hold the shutdown past SHUTDOWN_TIMEOUT_MS, and kept-alive connections are left to
 * their clients (as a proxy's pool holds them): a request sent over one after the listener closed is
 * answered and ends it, even an answer that skips the hooks, and the process exits once they are closed.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { createTestDatabase, newKeyPrefix, REDIS_URL, requirePostgres } from '../support/engines.ts';
import { exitWithin, startServerProcess, unlimitedKey, type ServerProcess } from '../support/processes.ts';
import { nextAnswer, openSocket, request, untilClosed } from '../support/raw-http.ts';
import { tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const CLIENTS = 32;
const DRAIN_MS = 500;
/** Answers received before the signal is sent, so it lands in the middle of the load. */
const ANSWERS_BEFORE_SIGNAL = 300;

interface Deployment {
  env: Record<string, string>;
}

/** A SQLite file of the test's own, removed when the test ends. */
function sqliteDeployment(t: TestContext): Deployment {
  return { env: { DATABASE_URL: `sqlite:${join(tempDir(t), 'petstore.db')}` } };
}

/** A PostgreSQL database and Redis keys of the test's own, dropped and deleted when the test ends. */
async function postgresDeployment(t: TestContext): Promise<Deployment> {
  const database = await createTestDatabase(t);
  return { env: { DATABASE_URL: database.url, REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: newKeyPrefix(t) } };
}

/** Waits for the process to exit, at most boundMs; kills it (and fails) past that. */
async function awaitExit(server: ServerProcess, boundMs: number): Promise<{ code: number | null; ms: number }> {
  const started = Date.now();
  const code = await exitWithin(server, boundMs);
  if (code === 'late') assert.fail(`the process had not exited ${boundMs} ms after the signal`);
  return { code, ms: Date.now() - started };
}

/** Every pet in the database, read page by page through a server process. */
async function allPets(url: string, key: string): Promise<Map<number, { id: number; name: string; categoryId: number }>> {
  const stored = new Map<number, { id: number; name: string; categoryId: number }>();
  let next: string | null = '/v1/pets?limit=100';
  while (next) {
    const res = await fetch(url + next, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    for (const pet of (await res.json()) as { id: number; name: string; categoryId: number }[]) stored.set(pet.id, pet);
    next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
  }
  return stored;
}

interface LoadOutcome {
  statuses: Map<number, number>;
  created: { id: number; name: string; categoryId: number }[];
  /** Requests that failed in a way a graceful shutdown must not cause. */
  failures: string[];
  /** New connections refused (or dropped from the closing listener's queue) after the listener closed. */
  refusedAfterClose: number;
  /** Requests sent over a connection kept alive from an earlier request. */
  reused: number;
  firstRefusalAt: number | undefined;
}

/**
 * CLIENTS workers, each with a keep-alive agent of one connection, alternating POST and GET until
 * the server refuses them. signal() is called once ANSWERS_BEFORE_SIGNAL answers have arrived.
 */
async function loadUntilRefused(url: string, key: string, signal: () => number): Promise<LoadOutcome> {
  const outcome: LoadOutcome = {
    statuses: new Map(),
    created: [],
    failures: [],
    refusedAfterClose: 0,
    reused: 0,
    firstRefusalAt: undefined,
  };
  let answered = 0;
  let signalledAt: number | undefined;
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const worker = async (w: number) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; ; i++) {
        try {
          const post = i % 2 === 0;
          const body = JSON.stringify({ name: `w${w}-${i}`, categoryId: i + 1 });
          const res = post
            ? await request(`${url}/v1/pets`, { method: 'POST', headers, body, agent })
            : await request(`${url}/v1/pets?limit=10`, { headers, agent });
          outcome.statuses.set(res.status, (outcome.statuses.get(res.status) ?? 0) + 1);
          if (res.reusedSocket) outcome.reused++;
          if (res.status === 201) outcome.created.push(JSON.parse(res.body));
          if (++answered === ANSWERS_BEFORE_SIGNAL) signalledAt = signal();
        } catch (err) {
          const { code, reusedSocket } = err as NodeJS.ErrnoException & { reusedSocket?: boolean };
          // The listener cannot close before the drain ends. After that, a new connection is refused,
          // or reset by the kernel if it was still queued in the closing listener's backlog; the
          // server never saw either. A reset of a kept-alive connection is a failure.
          const listenerMayBeClosed = signalledAt !== undefined && Date.now() >= signalledAt + DRAIN_MS - 50;
          const neverReachedServer = code === 'ECONNREFUSED' || (code === 'ECONNRESET' && !reusedSocket);
          if (listenerMayBeClosed && neverReachedServer) {
            outcome.refusedAfterClose++;
            outcome.firstRefusalAt ??= Date.now();
            return;
          }
          outcome.failures.push(`worker ${w} request ${i}: ${code} ${(err as Error).message} (reused connection: ${reusedSocket})`);
          return;
        }
      }
    } finally {
      agent.destroy();
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, w) => worker(w)));
  return outcome;
}

async function shutDownUnderLoad(t: TestContext, deployment: Deployment): Promise<void> {
  const env = { ...deployment.env, LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_MS: String(DRAIN_MS), SHUTDOWN_TIMEOUT_MS: '10000' };
  const key = await unlimitedKey(env);
  const server = await startServerProcess(env, { owner: t });
  try {
    // A create whose body is still on its way when the listener closes.
    const slow = await openSocket(server.url);
    const slowAnswer = nextAnswer(slow);
    const slowBody = JSON.stringify({ name: 'Slow sender', categoryId: 7 });
    slow.write(
      `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${slowBody.length}\r\n\r\n${slowBody.slice(0, 5)}`,
    );

    let signalledAt = 0;
    const load = loadUntilRefused(server.url, key, () => {
      signalledAt = Date.now();
      server.child.kill('SIGTERM');
      return signalledAt;
    });
    // The rest of the body once the listener has certainly closed (new connections are refused).
    const finishSlowBody = (async () => {
      while (!signalledAt) await sleep(10);
      await sleep(DRAIN_MS + 300);
      slow.write(slowBody.slice(5));
    })();
    const outcome = await load;
    await finishSlowBody;
    const answer = await slowAnswer;
    const { code, ms } = await awaitExit(server, 12_000);
    slow.destroy();

    assert.deepEqual(outcome.failures, [], 'requests failed other than by a refused connection after the listener closed');
    assert.deepEqual(
      [...outcome.statuses.keys()].filter((s) => s < 200 || s >= 300),
      [],
      `non-2xx answers: ${[...outcome.statuses]}`,
    );
    assert.ok(outcome.reused > CLIENTS, `the clients kept their connections alive (${outcome.reused} reused)`);
    assert.equal(code, 0, `exit status ${code}\n${server.output()}`);
    assert.ok(Date.now() - signalledAt < 10_000, `exit ${Date.now() - signalledAt} ms after the signal`);
    assert.equal(answer.status, 201, `the create still arriving when the listener closed: ${JSON.stringify(answer)}`);
    assert.equal(answer.headers.connection, 'close', 'answers during shutdown tell the client to reconnect');
    assert.ok(outcome.firstRefusalAt! - signalledAt >= DRAIN_MS - 50, 'the listener stayed open for the drain');

    const again = await startServerProcess(env, { owner: t });
    try {
      const stored = await allPets(again.url, key);
      const lost = outcome.created.filter((pet) => JSON.stringify(stored.get(pet.id)) !== JSON.stringify(pet));
      assert.deepEqual(lost, [], 'every pet answered 201 is stored as answered');
      assert.deepEqual(stored.get(JSON.parse(answer.body).id)?.name, 'Slow sender');
    } finally {
      again.child.kill('SIGTERM');
      assert.equal((await awaitExit(again, 12_000)).code, 0);
    }
    const answers = [...outcome.statuses.values()].reduce((a, b) => a + b, 0);
    console.log(
      `# shutdown under load: ${answers} answers (${outcome.created.length} creates, ${outcome.reused} over kept-alive connections), ` +
        `${outcome.refusedAfterClose} refused after close, exit ${ms} ms after the load ended`,
    );
  } finally {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
  }
}

test('SIGTERM under load on SQLite: nothing reset, all 2xx, the slow create completes, every 201 stored, exit 0', async (t) => {
  await shutDownUnderLoad(t, sqliteDeployment(t));
});

test('SIGTERM under load on PostgreSQL and Redis: the same promises', async (t) => {
  if (!requirePostgres(t, 'PostgreSQL + Redis shutdown test', true)) return;
  await shutDownUnderLoad(t, await postgresDeployment(t));
});

test('a client that never finishes its request is cut at SHUTDOWN_TIMEOUT_MS less a second; the process still exits 0', async (t) => {
  const deployment = sqliteDeployment(t);
  const env = { ...deployment.env, LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_MS: '200', SHUTDOWN_TIMEOUT_MS: '3000' };
  const server = await startServerProcess(env, { owner: t });
  try {
    const stuck = await openSocket(server.url);
    const stuckEnd = untilClosed(stuck);
    stuck.write('POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na');
    await sleep(200);
    const signalledAt = Date.now();
    server.child.kill('SIGTERM');
    const { closedAt } = await stuckEnd;
    const { code } = await awaitExit(server, 8000);
    assert.equal(code, 0, server.output());
    // Cut at 2 s, not before: the request had the shutdown's time to finish.
    assert.ok(closedAt - signalledAt >= 1800, `cut ${closedAt - signalledAt} ms after the signal`);
    assert.ok(Date.now() - signalledAt < 8000);
    assert.match(server.output(), /"connections":1,"msg":"shutdown: closing connections that did not end in time"/);
  } finally {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
  }
});

test('behind a proxy, kept-alive connections are left to it: alive through the drain, each next answer after the listener closed ends its connection, even one the framework writes; exit once they are closed', async (t) => {
  const deployment = sqliteDeployment(t);
  const env = { ...deployment.env, LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_MS: '500', SHUTDOWN_TIMEOUT_MS: '20000', TRUST_PROXY: '1' };
  // Asked on a connection of its own, which fetch's pool would otherwise keep open.
  const server = await startServerProcess(env, { isReady: async (url) => (await request(`${url}/healthz`)).status === 200, owner: t });
  try {
    // Three connections kept alive since before the signal, as a proxy's pool holds them.
    const [asks, malformed, leaves] = await Promise.all([0, 1, 2].map(() => openSocket(server.url)));
    const ask = async (socket: Socket, path: string) => {
      const answer = nextAnswer(socket);
      socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      return answer;
    };
    for (const socket of [asks!, malformed!, leaves!]) assert.equal((await ask(socket, '/healthz')).headers.connection, 'keep-alive');
    const ends = [asks!, malformed!, leaves!].map((socket) => untilClosed(socket));
    let closedByServer = false;
    void Promise.race(ends.slice(0, 2)).then(() => (closedByServer = true));

    const signalledAt = Date.now();
    server.child.kill('SIGTERM');
    await sleep(150);
    const duringDrain = await ask(asks!, '/readyz');
    assert.deepEqual([duringDrain.status, duringDrain.headers.connection], [503, 'keep-alive'], 'the drain keeps connections alive');
    // The listener closes when the drain ends: a new connection is refused, the old ones stay.
    await eventually(
      () =>
        openSocket(server.url).then(
          (s) => (s.destroy(), false),
          () => true,
        ),
      5000,
      50,
    );
    assert.ok(Date.now() - signalledAt >= 450, 'not before the drain ended');
    await sleep(300);
    assert.equal(closedByServer, false, 'the server closes no idle connection itself');

    const served = await ask(asks!, '/healthz');
    assert.deepEqual([served.status, served.headers.connection], [200, 'close']);
    // A malformed path is answered by the framework before any hook runs; it still ends the connection.
    const refused = await ask(malformed!, '/v1/pets/%zz');
    assert.deepEqual([refused.status, refused.headers.connection], [400, 'close']);
    leaves!.end();
    const closed = await Promise.all(ends);

    const { code } = await awaitExit(server, 15_000);
    assert.equal(code, 0, server.output());
    // Once the clients closed their connections, far sooner than the 19 s cut-off.
    assert.ok(Date.now() - Math.max(...closed.map((c) => c.closedAt)) < 3000, `exit ${Date.now() - signalledAt} ms after the signal`);
    assert.doesNotMatch(server.output(), /did not end in time/);
  } finally {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
  }
});

test('without a proxy, idle connections are closed when the listener closes, not at their keep-alive timeout', async (t) => {
  const deployment = sqliteDeployment(t);
  const env = { ...deployment.env, LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_MS: '500', SHUTDOWN_TIMEOUT_MS: '20000' };
  const server = await startServerProcess(env, { owner: t });
  try {
    const idle = await openSocket(server.url);
    const idleAnswer = nextAnswer(idle);
    idle.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal((await idleAnswer).headers.connection, 'keep-alive');
    const idleEnd = untilClosed(idle);
    const signalledAt = Date.now();
    server.child.kill('SIGTERM');
    const { code } = await awaitExit(server, 15_000);
    assert.equal(code, 0, server.output());
    // Far sooner than the 72 s keep-alive timeout or the 19 s cut-off.
    assert.ok(Date.now() - signalledAt < 6000, `exit ${Date.now() - signalledAt} ms after the signal`);
    const idleClosed = await idleEnd;
    assert.equal(idleClosed.text, '', 'the idle connection was closed without an answer to anything');
    assert.ok(idleClosed.closedAt - signalledAt >= 450, 'not before the drain ended');
  } finally {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
  }
});

test('shutdown settings: the drain must leave two seconds of SHUTDOWN_TIMEOUT_MS; bad values are refused by name', () => {
  assert.deepEqual([loadConfig({}).shutdownDrainMs, loadConfig({}).shutdownTimeoutMs], [1000, 10_000]);
  assert.equal(loadConfig({ SHUTDOWN_DRAIN_MS: '8000' }).shutdownDrainMs, 8000);
  assert.equal(loadConfig({ SHUTDOWN_DRAIN_MS: '20000', SHUTDOWN_TIMEOUT_MS: '30000' }).shutdownDrainMs, 20_000);
  assert.throws(
    () => loadConfig({ SHUTDOWN_DRAIN_MS: '8001' }),
    (err: Error) => err instanceof ConfigError && /SHUTDOWN_DRAIN_MS \(8001\).*SHUTDOWN_TIMEOUT_MS \(10000\)/.test(err.message),
  );
  for (const bad of ['1999', '120001', '5s', '-1']) {
    assert.throws(
      () => loadConfig({ SHUTDOWN_TIMEOUT_MS: bad }),
      (err: Error) => err instanceof ConfigError && err.message.startsWith('SHUTDOWN_TIMEOUT_MS'),
    );
  }
});
