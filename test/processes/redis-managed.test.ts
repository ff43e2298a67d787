/**
 * Redis as managed services offer it: TLS (`rediss://`) with an authority of the service's own
 * (REDIS_TLS_CA_FILE), and an ACL user with a password in the URL, the default user switched off. The
 * Redis is a redis-server of the test's own with certificates made here; the service is the real
 * command, on SQLite.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { newKeyPrefix } from '../support/engines.ts';
import { countedIn } from '../support/shared-counts.ts';
import { freePort, keysCreate, runCli, startServerProcess, type ServerProcess } from '../support/processes.ts';
import { makeCertificates, startRedis, tlsLines, type Certificates, type RedisProcess } from '../support/redis-servers.ts';
import { atEnd, suiteOwner, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const PASSWORD = 'limiter-secret-7f3a';

describe('Redis over TLS with an ACL user', () => {
  let dir: string;
  let certs: Certificates;
  let redis: RedisProcess;
  let prefix: string;
  let env: Record<string, string>;
  // Undone in reverse: the servers, Redis, then the folder with the authority's private key.
  const suite = suiteOwner();
  const url = (password = PASSWORD) => `rediss://limiter:${password}@127.0.0.1:${redis.port}`;
  const serve = (extra: Record<string, string>) => startServerProcess({ ...env, LOG_LEVEL: 'info', ...extra }, { owner: suite });
  const get = (server: ServerProcess, key: string) => fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
  /** A server with its metrics on a private listener, and how many limit decisions it took in memory, without Redis. */
  const serveMetered = async (extra: Record<string, string>) => {
    const port = await freePort();
    const server = await serve({ ...extra, METRICS_PORT: String(port) });
    const decidedInMemory = async () => {
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return Number(/^petstore_ratelimit_fallback_total (\d+)$/m.exec(metrics)?.[1]);
    };
    return { server, decidedInMemory };
  };

  before(async () => {
    dir = tempDir(suite);
    certs = makeCertificates(dir);
    prefix = newKeyPrefix(); // in the test's own Redis, which goes with its keys
    // The user may touch its deployment's keys only, and nothing that administers the server.
    redis = await startRedis(
      dir,
      'managed',
      [...tlsLines(certs), 'user default off', `user limiter on >${PASSWORD} ~${prefix}:* +@all -@dangerous +info`],
      true,
    );
    atEnd(suite, () => redis.kill());
    env = { DATABASE_URL: `sqlite:${dir}/petstore.db`, REDIS_KEY_PREFIX: prefix };
  });

  test('rediss:// with the CA file and the user in the URL: every decision is counted in that Redis, and the limit holds', async () => {
    const key = await keysCreate(env, '--plan', 'free');
    const server = await serve({ REDIS_URL: url(), REDIS_TLS_CA_FILE: certs.caFile });
    // Stay inside one minute window: start early in a minute.
    if (Date.now() % 60_000 > 45_000) await sleep(60_000 - (Date.now() % 60_000) + 200);
    const statuses = [];
    for (let i = 0; i < 61; i++) statuses.push((await get(server, key)).status);
    assert.deepEqual(statuses, [...Array(60).fill(200), 429]);

    const direct = new Redis({ host: '127.0.0.1', port: redis.port, username: 'limiter', password: PASSWORD, tls: { ca: certs.ca } });
    try {
      // KEYS is among the commands the user may not run; SCAN is not.
      const [, counters] = await direct.scan(0, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      const minute = counters.find((k) => k.endsWith(':minute:by-instance'));
      assert.ok(minute, `a minute counter under ${prefix}: ${counters.join(', ')}`);
      assert.equal(await countedIn(direct, minute), 60);
    } finally {
      direct.disconnect();
    }
    assert.match(server.output(), new RegExp(`rate limits in Redis at 127\\.0\\.0\\.1:${redis.port}`));
    assert.doesNotMatch(server.output(), /Redis unreachable/);
    assert.ok(!server.output().includes(PASSWORD), 'the password is never logged');
  });

  test("without the service's authority the certificate is refused: served with limits in memory, and the log says why", async () => {
    const key = await keysCreate(env, '--plan', 'free');
    const { server, decidedInMemory } = await serveMetered({ REDIS_URL: url() });
    // Counted in memory, as in Redis: a Free key's 61st request in a minute is refused. Start early in one.
    if (Date.now() % 60_000 > 45_000) await sleep(60_000 - (Date.now() % 60_000) + 200);
    const answers = [];
    for (let i = 0; i < 61; i++) answers.push(await get(server, key));
    assert.deepEqual(
      answers.map((a) => a.status),
      [...Array(60).fill(200), 429],
    );
    assert.equal(answers[0]!.headers.get('x-ratelimit-limit'), '60');
    assert.match(server.output(), /REDIS_URL names Redis at 127\.0\.0\.1:\d+, which cannot be reached \([^)]*certificate/);
    // Each decided by the fallback: the start-up check's warning alone would not show it.
    const inMemory = await decidedInMemory();
    assert.ok(inMemory >= 61, `${inMemory} decisions taken in memory`);
    assert.ok(!server.output().includes(PASSWORD));
  });

  test('a wrong password, or keys outside what the ACL user may touch, are refused by Redis: limits in memory, and a warning', async () => {
    const key = await keysCreate(env, '--plan', 'free');
    const { server: wrong, decidedInMemory } = await serveMetered({ REDIS_URL: url('not-the-password'), REDIS_TLS_CA_FILE: certs.caFile });
    assert.equal((await get(wrong, key)).status, 200);
    assert.ok((await decidedInMemory()) >= 1, 'decided in memory');
    assert.match(
      wrong.output(),
      /REDIS_URL names Redis at 127\.0\.0\.1:\d+, which cannot be reached \([^)]*(WRONGPASS|invalid username-password)/,
    );
    assert.ok(!wrong.output().includes('not-the-password'));

    const outside = await serve({ REDIS_URL: url(), REDIS_TLS_CA_FILE: certs.caFile, REDIS_KEY_PREFIX: `${prefix}-other` });
    assert.equal((await get(outside, key)).status, 200);
    await eventually(async () => /Redis unreachable: rate limiting in memory/.test(outside.output()), 5000);
    assert.match(outside.output(), /NOPERM/);
  });

  test('a CA file that cannot be read stops the start with one line naming REDIS_TLS_CA_FILE', async () => {
    const result = await runCli(['serve'], { ...env, PORT: '0', REDIS_URL: url(), REDIS_TLS_CA_FILE: `${dir}/missing.pem` });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /REDIS_TLS_CA_FILE cannot be read: .*missing\.pem \(ENOENT\)/);
  });
});
