/**
 * Three server processes on one PostgreSQL database and one Redis behave as one service: one global
 * limit per key, shared pets and cursors, bans and revocations seen everywhere.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestDatabase, newKeyPrefix, REDIS_URL } from '../support/engines.ts';
import { keysCreateJson, lastLine, runCli, startServerProcess, type ServerProcess } from '../support/processes.ts';
import { suiteOwner } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

type Answer = { status: number; code: string | undefined; headers: Headers; body: any };

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
    env = { DATABASE_URL: database.url, REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: keyPrefix, LOG_LEVEL: 'warn' };
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

  test('a ban earned on one instance reaches every instance, and so does unban', async () => {
    const { id, key } = await createKey('--plan', 'enterprise', '--rpm', '2', '--rpd', '1000');
    // A client that keeps sending after its 429s, round-robin over the instances: refusals in the
    // first BAN_GRACE_MS (1 s) after the first one are not counted, the next 20 are, on any instance.
    const started = Date.now();
    const codes: { code: string | undefined; ms: number }[] = [];
    for (let i = 0; Date.now() - started < 10_000; i++) {
      const code = (await get(servers[i % servers.length]!, '/v1/pets', key)).code;
      codes.push({ code, ms: Date.now() - started });
      if (code === 'key_banned') break;
      await sleep(20);
    }
    const firstBanned = codes.find((c) => c.code === 'key_banned');
    assert.ok(firstBanned, JSON.stringify(codes));
    const firstRefused = codes.find((c) => c.code === 'rate_limited')!;
    assert.ok(firstBanned.ms - firstRefused.ms >= 1000, `banned ${firstBanned.ms - firstRefused.ms} ms after the first refusal`);
    for (const s of servers) await eventually(async () => (await get(s, '/v1/pets', key)).code === 'key_banned', 5000);
    const listed = await runCli(['keys', 'list', '--json'], env);
    assert.ok(JSON.parse(lastLine(listed.stdout)).find((k: { id: string; bannedUntil: string | null }) => k.id === id)?.bannedUntil);
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
