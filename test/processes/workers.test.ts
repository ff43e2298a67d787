/**
 * WORKERS (docs/workers.md) through a real process. At 1, 2, 4 and 8 workers on one port (threads may outnumber
 * cores), on SQLite and on PostgreSQL with Redis (one instance toward it), and at 4 on PostgreSQL alone: a key's
 * minute and day are admitted exactly to their limit under many concurrent connections, an address's anonymous
 * limit likewise, the ban at the threshold is placed once, and one Idempotency-Key makes one pet whichever workers
 * its retries reach. Then: key changes (plan, unban, revoke) reach every worker within KEY_CACHE_TTL_MS; the
 * connection caps are the process's; a backup and a migrate run, a held write lock is answered 503 with
 * Retry-After by any worker, and a restore is refused while it serves; SIGHUP and SIGTERM reach every worker; a
 * worker ended under load is replaced, with nothing acknowledged lost and no pet made twice; a platform without
 * SO_REUSEPORT serves from one thread; a port in use is refused as with one thread.
 */
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test, type TestContext } from 'node:test';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import { Redis } from 'ioredis';
import { createTestDatabase, newKeyPrefix, REDIS_URL, requirePostgres, withPostgres } from '../support/engines.ts';
import {
  explain,
  freePort,
  keysCreateJson,
  runCli,
  startServerProcess,
  type EnvOverrides,
  type ServerProcess,
} from '../support/processes.ts';
import { holdSqliteWriteLock } from '../support/lock-holders.ts';
import { tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';
import { endWorker, INSPECT_ENV } from '../support/worker-ends.ts';

interface Answer {
  status: number;
  body: string;
  retryAfter?: string;
}

/** One request on a connection of its own, so the kernel may hand each to another worker. */
function send(url: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers, agent: new Agent({ keepAlive: false }) }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text, retryAfter: res.headers['retry-after'] }));
    });
    req.on('error', reject).end(body);
  });
}

const tally = (answers: Answer[]) => {
  const by: Record<number, number> = {};
  for (const a of answers) by[a.status] = (by[a.status] ?? 0) + 1;
  return by;
};

const burst = (n: number, call: () => Promise<Answer>) => Promise.all(Array.from({ length: n }, call));

/** Waits past the minute's turn when it is near, so that no window turns during a burst. */
async function awayFromMinuteTurn(): Promise<void> {
  const msToTurn = 60_000 - (Date.now() % 60_000);
  if (msToTurn < 15_000) await sleep(msToTurn + 100);
}

/** The process's /metrics, from its metrics listener. */
async function scrape(env: EnvOverrides): Promise<string> {
  return (await fetch(`http://127.0.0.1:${env.METRICS_PORT}/metrics`)).text();
}

/** A series' value in an exposition (0 when absent). */
function valueOf(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/** The process's log, a JSON line each. */
const logLines = (server: ServerProcess) =>
  server
    .stdout()
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { msg: string; worker: number });

/** The workers whose "shut down" line the log holds, in order of their number. */
const workersShutDown = (server: ServerProcess) =>
  logLines(server)
    .filter((l) => l.msg === 'shut down')
    .map((l) => l.worker)
    .sort((a, b) => a - b);

/** A server of `workers` workers on the environment given, once the supervisor says every one serves. */
async function startWorkers(t: TestContext, env: EnvOverrides, workers: number): Promise<ServerProcess> {
  const server = await startServerProcess({ ...env, WORKERS: String(workers) }, { owner: t, startWithinMs: 60_000 });
  await eventually(async () => server.output().includes(workers === 1 ? '1 worker)' : `${workers} workers)`), 60_000, 50);
  return server;
}

/** The limits, the ban and the Idempotency-Key, on a server whose storage `env` names; `rows` counts the pets named so. */
async function exactAcrossWorkers(t: TestContext, env: EnvOverrides, workers: number, rows: (name: string) => Promise<number>) {
  env = { ...env, METRICS_PORT: String(await freePort()), ANONYMOUS_RATE_LIMIT_PER_MINUTE: '40', BAN_THRESHOLD: '20', BAN_GRACE_MS: '0' };
  const limited = await keysCreateJson(env, '--plan', 'enterprise', '--rpm', '70', '--rpd', '70');
  const free = await keysCreateJson(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '100000');
  const server = await startWorkers(t, env, workers);
  const auth = { Authorization: `Bearer ${limited.key}` };

  await awayFromMinuteTurn();
  // 200 at once for a key of 70: exactly 70 admitted, and of the 130 refused the 20th (no grace) bans it, once.
  assert.deepEqual(tally(await burst(200, () => send(server.url, 'GET', '/v1/pets?limit=1', auth))), { 200: 70, 429: 130 });
  // An address without a key: exactly its anonymous limit answered (401), the rest refused.
  assert.deepEqual(tally(await burst(120, () => send(server.url, 'GET', '/v1/pets', {}))), { 401: 40, 429: 80 });

  const name = `Rex-${workers}`;
  const post = { Authorization: `Bearer ${free.key}`, 'Content-Type': 'application/json', 'Idempotency-Key': `one-pet-${workers}` };
  const creates = await burst(50, () => send(server.url, 'POST', '/v1/pets', post, JSON.stringify({ name, categoryId: 1 })));
  const made = creates.filter((a) => a.status === 201 || a.status === 200);
  const ids = new Set(made.map((a) => (JSON.parse(a.body) as { id: string }).id));
  assert.equal(ids.size, 1, `answers: ${JSON.stringify(tally(creates))}`);
  assert.equal(await rows(name), 1);

  const metrics = await scrape(env);
  assert.equal(valueOf(metrics, 'petstore_bans_total{plan="enterprise"}'), 1, 'one ban, placed once');
  if (workers > 1) assert.equal(valueOf(metrics, 'petstore_workers_serving'), workers);
}

describe('workers', () => {
  for (const workers of [1, 2, 4, 8]) {
    test(`SQLite, WORKERS=${workers}: limits exact from hundreds of concurrent connections, the ban placed once, one pet per Idempotency-Key`, async (t) => {
      const dir = tempDir(t);
      const env = { DATABASE_URL: `sqlite:${dir}/petstore.db` };
      await exactAcrossWorkers(t, env, workers, async (name) => {
        const db = new DatabaseSync(`${dir}/petstore.db`, { readOnly: true });
        try {
          return (db.prepare('SELECT count(*) AS n FROM pets WHERE name = ?').get(name) as { n: number }).n;
        } finally {
          db.close();
        }
      });
    });
  }

  const pets = (url: string) => (name: string) =>
    withPostgres(url, async (client) => Number((await client.query('SELECT count(*) AS n FROM pets WHERE name = $1', [name])).rows[0].n));

  test('PostgreSQL without Redis, WORKERS=4: the same, the in-memory limiter shared, the pool divided', async (t) => {
    if (!requirePostgres(t, 'workers on PostgreSQL')) return;
    const { url } = await createTestDatabase(t);
    await exactAcrossWorkers(t, { DATABASE_URL: url }, 4, pets(url));
    // The process's connections: its pool of 10 shared among the workers, and the supervisor's closed.
    const opened = await withPostgres(url, async (client) => {
      const database = new URL(url).pathname.slice(1);
      const result = await client.query('SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [
        database,
      ]);
      return Number(result.rows[0].n);
    });
    assert.ok(opened <= 10, `${opened} connections open to the database`);
  });

  for (const workers of [1, 2, 4, 8]) {
    test(`PostgreSQL and Redis, WORKERS=${workers}: the same, and the process is one instance toward Redis`, async (t) => {
      if (!requirePostgres(t, 'workers on PostgreSQL and Redis', true)) return;
      const { url } = await createTestDatabase(t);
      const prefix = newKeyPrefix(t);
      await exactAcrossWorkers(t, { DATABASE_URL: url, REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: prefix }, workers, pets(url));
      // Each instance's part of a window is a field of its own: one process, one field, whichever worker was asked.
      const redis = new Redis(REDIS_URL!);
      t.after(() => redis.disconnect());
      const windows = (await redis.keys(`${prefix}:*:by-instance`)).filter((k) => k.includes('key:'));
      assert.ok(windows.length >= 2, `the key's windows: ${windows.join(', ')}`);
      const instances = new Set<string>();
      for (const key of windows) for (const field of Object.keys(await redis.hgetall(key))) if (field !== 's') instances.add(field);
      assert.equal(instances.size, 1, `instances counted in Redis: ${[...instances].join(', ')}`);
    });
  }

  test('Redis unreachable, WORKERS=4: one fallback for the process, exact to the limit', async (t) => {
    if (!requirePostgres(t, 'workers with Redis unreachable')) return;
    const { url } = await createTestDatabase(t);
    const closed = await freePort();
    const env = { DATABASE_URL: url, REDIS_URL: `redis://127.0.0.1:${closed}`, METRICS_PORT: String(await freePort()) };
    const { key } = await keysCreateJson(env, '--plan', 'enterprise', '--rpm', '70', '--rpd', '70');
    const server = await startWorkers(t, env, 4);
    await awayFromMinuteTurn();
    const auth = { Authorization: `Bearer ${key}` };
    assert.deepEqual(tally(await burst(200, () => send(server.url, 'GET', '/v1/pets?limit=1', auth))), { 200: 70, 429: 130 });
    const metrics = await scrape(env);
    assert.equal(valueOf(metrics, 'petstore_ratelimit_degraded'), 1);
    assert.ok(
      valueOf(metrics, 'petstore_ratelimit_fallback_total') >= 200,
      metrics.match(/^petstore_ratelimit_fallback_total.*$/m)?.[0] ?? 'no such series',
    );
  });

  test('key changes reach every worker within KEY_CACHE_TTL_MS: a plan raised and a ban lifted, then the key revoked', async (t) => {
    const dir = tempDir(t);
    const env = { DATABASE_URL: `sqlite:${dir}/petstore.db`, KEY_CACHE_TTL_MS: '1000', BAN_THRESHOLD: '2', BAN_GRACE_MS: '0' };
    const { id, key } = await keysCreateJson(env, '--plan', 'enterprise', '--rpm', '3', '--rpd', '100000');
    const server = await startWorkers(t, env, 4);
    const auth = { Authorization: `Bearer ${key}` };
    const many = () => burst(60, () => send(server.url, 'GET', '/v1/pets?limit=1', auth));

    await awayFromMinuteTurn();
    assert.deepEqual(tally(await many()), { 200: 3, 429: 57 });
    await runCli(['keys', 'plan', id, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '100000'], env);
    await runCli(['keys', 'unban', id], env);
    await sleep(1500);
    assert.deepEqual(tally(await many()), { 200: 60 }, 'every worker sees the new plan and no ban');
    await runCli(['keys', 'revoke', id], env);
    await sleep(1500);
    assert.deepEqual(tally(await many()), { 401: 60 }, 'every worker refuses the revoked key');
  });

  test("the connection caps are the process's; backup, migrate and a write lock held, a restore refused, while it serves; SIGHUP and SIGTERM reach every worker", async (t) => {
    const dir = tempDir(t);
    const env = {
      DATABASE_URL: `sqlite:${dir}/petstore.db`,
      MAX_CONNECTIONS: '100',
      MAX_CONNECTIONS_PER_ADDRESS: '5',
      SQLITE_LOCK_WAIT_MS: '300',
      METRICS_PORT: String(await freePort()),
    };
    const server = await startWorkers(t, env, 4);
    const { port } = new URL(server.url);

    // 12 connections from one address (not the test's own, whose readiness checks keep theirs open), each asking on a
    // connection it keeps: 5 answered, 7 closed unanswered.
    const sockets: net.Socket[] = [];
    const outcomes = await Promise.all(
      Array.from(
        { length: 12 },
        () =>
          new Promise<'answered' | 'closed'>((resolve) => {
            const socket = net.connect({ port: Number(port), host: '127.0.0.1', localAddress: '127.0.0.2' });
            sockets.push(socket);
            socket.on('data', () => resolve('answered'));
            socket.on('close', () => resolve('closed'));
            socket.on('error', () => resolve('closed'));
            socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
          }),
      ),
    );
    assert.deepEqual(
      { answered: outcomes.filter((o) => o === 'answered').length, closed: outcomes.filter((o) => o === 'closed').length },
      { answered: 5, closed: 7 },
    );
    assert.equal(valueOf(await scrape(env), 'petstore_connections_refused_total{reason="address"}'), 7);
    for (const socket of sockets) socket.destroy();

    // The file while every worker has it open: a backup is taken, a restore refused.
    const backup = await runCli(['backup', `${dir}/copy.db`], env);
    assert.equal(backup.code, 0, explain(['backup'], backup));
    const restore = await runCli(['restore', `${dir}/copy.db`], env);
    assert.notEqual(restore.code, 0, explain(['restore'], restore));
    console.log(`# restore while serving: ${restore.stderr.trim()}`);
    const migrate = await runCli(['migrate'], env);
    assert.equal(migrate.code, 0, explain(['migrate'], migrate));

    // SQLite's write lock held past SQLITE_LOCK_WAIT_MS: creates answered 503 with Retry-After by whichever worker, none
    // stored; once it is let go, created. One at a time, within the address's five connections.
    const { key } = await keysCreateJson(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '100000');
    const post = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
    const create = (name: string) => send(server.url, 'POST', '/v1/pets', post, JSON.stringify({ name, categoryId: 1 }));
    const lock = await holdSqliteWriteLock(t, `${dir}/petstore.db`);
    const held: Answer[] = [];
    for (let i = 0; i < 8; i++) held.push(await create('held'));
    await lock.release();
    assert.deepEqual(
      held.map((a) => [a.status, a.retryAfter !== undefined]),
      held.map(() => [503, true]),
    );
    assert.equal((await create('after')).status, 201);
    const db = new DatabaseSync(`${dir}/petstore.db`, { readOnly: true });
    assert.equal((db.prepare("SELECT count(*) AS n FROM pets WHERE name = 'held'").get() as { n: number }).n, 0);
    db.close();

    server.child.kill('SIGHUP');
    await eventually(async () => server.output().split('SIGHUP: nothing to reload').length - 1 === 4, 10_000, 50);
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0);
    assert.deepEqual(workersShutDown(server), [1, 2, 3, 4]);
    assert.equal(logLines(server).at(-1)!.msg, 'every worker shut down');
  });

  test('as soon as the first worker answers, the others still starting: the metrics answer, and on SIGTERM every worker shuts down, exit 0', async (t) => {
    const dir = tempDir(t);
    const env = { DATABASE_URL: `sqlite:${dir}/petstore.db`, WORKERS: '8', METRICS_PORT: String(await freePort()) };
    const server = await startServerProcess(env, { owner: t, startWithinMs: 60_000 });
    // Its metrics answer as soon as it does, however many workers are still starting.
    assert.match(await scrape(env), /^petstore_workers_configured 8$/m);
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0, server.output());
    assert.deepEqual(workersShutDown(server), [1, 2, 3, 4, 5, 6, 7, 8]);
  });

  test('a worker ended under load is started again, and every create acknowledged is stored once', async (t) => {
    const dir = tempDir(t);
    const env = { DATABASE_URL: `sqlite:${dir}/petstore.db`, METRICS_PORT: String(await freePort()), ...INSPECT_ENV };
    const { key } = await keysCreateJson(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '100000');
    const server = await startWorkers(t, env, 2);

    // Four clients create pets one after another, each retrying a create with its own Idempotency-Key until answered.
    const acknowledged = new Map<string, string>();
    let retries = 0;
    let stop = false;
    const client = async (c: number) => {
      for (let n = 0; !stop; n++) {
        const name = `pet-${c}-${n}`;
        const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Idempotency-Key': name };
        for (;;) {
          const answer = await send(server.url, 'POST', '/v1/pets', headers, JSON.stringify({ name, categoryId: 1 })).catch(
            () => undefined,
          );
          if (answer && (answer.status === 201 || answer.status === 200)) {
            acknowledged.set(name, (JSON.parse(answer.body) as { id: string }).id);
            break;
          }
          retries++;
          await sleep(20);
        }
      }
    };
    const clients = Promise.all([0, 1, 2, 3].map(client));
    await eventually(async () => acknowledged.size >= 100, 30_000, 20);
    await endWorker(server, 1);
    await eventually(async () => server.output().includes('worker 1 ended unasked: starting it again in 200 ms'), 10_000, 20);
    await eventually(async () => valueOf(await scrape(env), 'petstore_workers_serving') === 2, 10_000, 50);
    const before = acknowledged.size;
    await eventually(async () => acknowledged.size >= before + 100, 30_000, 20);
    // Ended again at once: the pause before its next start doubles.
    await endWorker(server, 1);
    await eventually(async () => server.output().includes('worker 1 ended unasked: starting it again in 400 ms'), 10_000, 20);
    stop = true;
    await clients;

    const metrics = await scrape(env);
    assert.equal(valueOf(metrics, 'petstore_worker_restarts_total'), 2);
    await eventually(async () => valueOf(await scrape(env), 'petstore_workers_serving') === 2, 10_000, 50);
    const db = new DatabaseSync(`${dir}/petstore.db`, { readOnly: true });
    t.after(() => db.close());
    const stored = db.prepare('SELECT id, name FROM pets').all() as { id: string; name: string }[];
    const byName = new Map<string, string[]>();
    for (const row of stored) byName.set(row.name, [...(byName.get(row.name) ?? []), row.id]);
    for (const [name, id] of acknowledged) assert.deepEqual(byName.get(name), [id], `${name}: acknowledged as ${id}`);
    // Nothing beyond what was acknowledged, but a create the clients gave up on when they stopped (one each at most).
    assert.ok(stored.length - acknowledged.size <= 4, `${stored.length} stored, ${acknowledged.size} acknowledged`);
    console.log(`# ${acknowledged.size} creates acknowledged, ${retries} retries`);
  });

  test('a platform without SO_REUSEPORT (forced) serves from one thread, and says so', async (t) => {
    const dir = tempDir(t);
    const preload = new URL('../support/no-reuse-port.ts', import.meta.url).pathname;
    const server = await startServerProcess(
      { DATABASE_URL: `sqlite:${dir}/petstore.db`, WORKERS: '4', NODE_OPTIONS: `--import ${preload}` },
      { owner: t },
    );
    await eventually(async () => server.output().includes('1 worker)'), 10_000, 50);
    assert.match(server.output(), /WORKERS is 4, but this platform cannot listen on one port from several threads/);
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    assert.doesNotMatch(server.output(), /"worker":2/);
  });

  test('a port in use is refused with PORT named, as with one thread, and no worker is left running', async (t) => {
    const dir = tempDir(t);
    const taken = net.createServer().listen(0, '127.0.0.1');
    t.after(() => taken.close());
    await new Promise((resolve) => taken.once('listening', resolve));
    const port = (taken.address() as net.AddressInfo).port;
    const result = await runCli(['serve'], {
      DATABASE_URL: `sqlite:${dir}/petstore.db`,
      WORKERS: '4',
      HOST: '127.0.0.1',
      PORT: String(port),
    });
    assert.equal(result.code, 1, explain(['serve'], result));
    assert.match(result.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: another process uses it \\(set PORT or --port\\)`));
  });
});
