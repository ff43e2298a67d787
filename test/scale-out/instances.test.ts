/**
 * Three server processes on one PostgreSQL database and one Redis behave as one service: one global
 * limit per key, shared pets and cursors, refusals counted toward one ban across instances, bans and
 * revocations seen everywhere.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestDatabase, newKeyPrefix, REDIS_URL } from '../support/engines.ts';
import { keysCreateJson, lastLine, runCli, startServerProcess, type ServerProcess } from '../support/processes.ts';
import { suiteOwner } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

type Answer = { status: number; code: string | undefined; headers: Headers; body: any };

/** Set for every instance: counted refusals of one key in a minute that earn a ban, and the grace after a window's first refusal. */
const BAN_THRESHOLD = 20;
const BAN_GRACE_MS = 1000;

async function get(server: ServerProcess, path: string, key: string): Promise<Answer> {
  const res = await fetch(server.url + path, { headers: { authorization: `Bearer ${key}` } });
  const body = (await res.json()) as any;
  return { status: res.status, code: body?.code, headers: res.headers, body };
}

describe('three instances on one PostgreSQL and one Redis', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let env: Record<string, string>;
  let servers: ServerProcess[];
  // Undone in reverse: the servers, then (their last hand-backs of unspent quota landed) the Redis
  // keys, then the database.
  const suite = suiteOwner();

  const createKey = (...args: string[]) => keysCreateJson(env, ...args);

  before(async () => {
    database = await createTestDatabase(suite);
    const keyPrefix = newKeyPrefix(suite);
    env = {
      DATABASE_URL: database.url,
      REDIS_URL: REDIS_URL!,
      REDIS_KEY_PREFIX: keyPrefix,
      LOG_LEVEL: 'warn',
      BAN_THRESHOLD: String(BAN_THRESHOLD),
      BAN_GRACE_MS: String(BAN_GRACE_MS),
    };
    // All three start at once: their migrations race for the advisory lock.
    servers = await Promise.all([0, 1, 2].map(() => startServerProcess(env, { owner: suite })));
  });

  test('a Free key sending round-robin gets exactly 60 admitted in one minute window, in total', async () => {
    const { key } = await createKey('--plan', 'free');
    // Stay inside one minute window: start early in a minute.
    if (Date.now() % 60_000 > 45_000) await sleep(60_000 - (Date.now() % 60_000) + 200);
    const answers = await Promise.all(Array.from({ length: 90 }, (_, i) => get(servers[i % 3]!, '/v1/pets', key)));
    assert.equal(answers.filter((a) => a.status === 200).length, 60);
    assert.equal(answers.filter((a) => a.status === 429).length, 30);
    const last = await get(servers[0]!, '/v1/pets', key);
    assert.equal(last.headers.get('x-ratelimit-remaining'), '0');
  });

  test('pets created on one instance are read and paged on the others', async () => {
    const { key } = await createKey('--plan', 'business');
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${servers[i % 3]!.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `shared ${i}`, categoryId: 7 }),
      });
      assert.equal(res.status, 201);
      ids.push(((await res.json()) as { id: number }).id);
    }
    const one = await get(servers[1]!, `/v1/pets/${ids[0]}`, key);
    assert.equal(one.body.name, 'shared 0');
    // Page 1 on instance 0, its cursor followed on instance 1, then on instance 2.
    const seen: number[] = [];
    let path: string | undefined = '/v1/pets?limit=2';
    for (let hop = 0; path; hop++) {
      const page = await get(servers[hop % 3]!, path, key);
      assert.equal(page.status, 200);
      seen.push(...page.body.map((p: { id: number }) => p.id));
      path = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')?.[1];
    }
    assert.deepEqual(
      seen.filter((id) => ids.includes(id)),
      ids,
    );
  });

  test('refusals on every instance count toward one ban: the ban comes at the shared threshold, though no instance reaches it alone, and not before; every instance sees it, and the unban', async () => {
    const { id, key } = await createKey('--plan', 'enterprise', '--rpm', '2', '--rpd', '1000');
    const banEnd = async () =>
      (JSON.parse(lastLine((await runCli(['keys', 'list', '--json'], env)).stdout)) as { id: string; bannedUntil: string | null }[]).find(
        (k) => k.id === id,
      )!.bannedUntil;
    // The key's minute and the minute its refusals are counted in must not turn: start early in one.
    if (Date.now() % 60_000 > 40_000) await sleep(60_000 - (Date.now() % 60_000) + 200);
    for (const s of servers.slice(0, 2)) assert.equal((await get(s, '/v1/pets', key)).status, 200);
    // The window's first refusal, then past the grace: refusals within it were in flight and never count.
    assert.equal((await get(servers[0]!, '/v1/pets', key)).code, 'rate_limited');
    await sleep(BAN_GRACE_MS + 500);

    // Counted refusals round-robin: by the threshold, each instance has made a third of them.
    const counted = (n: number) => get(servers[n % servers.length]!, '/v1/pets', key);
    for (let n = 1; n < BAN_THRESHOLD; n++) {
      assert.equal((await counted(n)).code, 'rate_limited', `counted refusal ${n} of ${BAN_THRESHOLD}: no ban yet`);
    }
    assert.equal(await banEnd(), null, `no ban after ${BAN_THRESHOLD - 1} counted refusals`);
    // The threshold-th is still answered rate_limited, and bans: that instance's next answer says so.
    assert.equal((await counted(BAN_THRESHOLD)).code, 'rate_limited');
    assert.equal(
      (await counted(BAN_THRESHOLD)).code,
      'key_banned',
      `banned at the ${BAN_THRESHOLD}th counted refusal, made on three instances`,
    );
    assert.ok(await banEnd(), 'the ban is stored');

    for (const s of servers) await eventually(async () => (await get(s, '/v1/pets', key)).code === 'key_banned', 5000);
    assert.equal((await runCli(['keys', 'unban', id], env)).code, 0);
    for (const s of servers) await eventually(async () => (await get(s, '/v1/pets', key)).code !== 'key_banned', 5000);
  });

  test('a revoked key is refused by every instance within 5 seconds', async () => {
    const { id, key } = await createKey('--plan', 'pro');
    for (const s of servers) assert.equal((await get(s, '/v1/pets', key)).status, 200);
    assert.equal((await runCli(['keys', 'revoke', id], env)).code, 0);
    for (const s of servers) await eventually(async () => (await get(s, '/v1/pets', key)).status === 401, 5000);
  });
});
