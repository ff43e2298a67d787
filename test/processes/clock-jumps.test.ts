/**
 * A wall clock that jumps (docs/reliability.md, "A clock that jumps"): one SQLite server whose clock
 * libfaketime moves forward and back while it runs, the CLI on the real clock. Windows it has counted stay
 * counted whichever way the clock moves; a ban lasts its length of real time; revocation, plan changes and
 * unbans arrive within their bound; an Idempotency-Key claim survives a day forward and back; an
 * unfinished claim stamped ahead of the server's clock is taken over after seconds, not after the jump.
 * Each case checks the server's Date header first, so it cannot pass on a clock that did not move.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { requestHash } from '../../src/services/idempotent-creates.ts';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import { faketimeEnv, requireLibfaketime, skipWithoutLibfaketime } from '../support/faketime.ts';
import { keysCreateJson, runCli, startServerProcess, type EnvOverrides, type ServerProcess } from '../support/processes.ts';
import { atEnd, suiteOwner, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const DAY_S = 86_400;
const HOUR_S = 3_600;
const KEY_CACHE_TTL_MS = 2000;
const BAN_SECONDS = 6;

interface Answer {
  status: number;
  code: string | undefined;
  retryAfter: number;
  limit: number;
  /** The server's Date header, in Unix seconds: its wall clock. */
  serverNowS: number;
  id: string | undefined;
  replayed: boolean;
}

describe('a wall clock that jumps', { skip: skipWithoutLibfaketime() }, () => {
  const suite = suiteOwner();
  let env: EnvOverrides;
  let server: ServerProcess;
  let offsetFile: string;
  let database: string;

  before(async () => {
    requireLibfaketime();
    const dir = tempDir(suite);
    database = join(dir, 'petstore.db');
    offsetFile = join(dir, 'faketime');
    writeFileSync(offsetFile, '+0');
    env = { DATABASE_URL: `sqlite:${database}`, LOG_LEVEL: 'warn' };
    server = await startServerProcess(
      {
        ...env,
        KEY_CACHE_TTL_MS: String(KEY_CACHE_TTL_MS),
        BAN_THRESHOLD: '3',
        BAN_DURATION_SECONDS: String(BAN_SECONDS),
        ...faketimeEnv(offsetFile),
      },
      { owner: suite },
    );
  });

  /** Moves the server's wall clock to `seconds` from the real one, and waits until its Date header shows it (cached for up to 1 s). */
  async function step(seconds: number, key: string): Promise<void> {
    writeFileSync(offsetFile, `${seconds >= 0 ? '+' : ''}${seconds}`);
    let off = NaN;
    await eventually(async () => {
      off = (await send(key, 'GET', '/v1/pets/1')).serverNowS - Date.now() / 1000;
      return Math.abs(off - seconds) < 5;
    }, 3000).catch(() => assert.fail(`the server's clock is ${off.toFixed(0)} s off, not ${seconds}`));
  }

  async function send(key: string, method = 'GET', path = '/v1/pets', init: { body?: unknown; idempotencyKey?: string } = {}) {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    if (init.idempotencyKey !== undefined) headers['idempotency-key'] = init.idempotencyKey;
    const res = await fetch(server.url + path, { method, headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) });
    const body = (await res.json().catch(() => undefined)) as { code?: string; id?: string } | undefined;
    return {
      status: res.status,
      code: res.status >= 400 ? body?.code : undefined,
      retryAfter: Number(res.headers.get('retry-after') ?? NaN),
      limit: Number(res.headers.get('x-ratelimit-limit')),
      serverNowS: Date.parse(res.headers.get('date')!) / 1000,
      id: res.status < 300 ? body?.id : undefined,
      replayed: res.headers.get('idempotent-replayed') === 'true',
    } satisfies Answer;
  }

  const createKey = (...args: string[]) => keysCreateJson(env, '--plan', 'enterprise', ...args);

  async function spend(key: string, n: number): Promise<void> {
    for (let i = 0; i < n; i++) assert.equal((await send(key)).status, 200, `request ${i + 1} of ${n}`);
  }

  test('a counted window is never reopened: a day forward and back, an hour back and forward', async (t) => {
    atEnd(t, () => writeFileSync(offsetFile, '+0'));
    // The minute window must not end in real time while the clock is moved about.
    while (new Date().getUTCSeconds() > 40) await sleep(500);
    const minute = (await createKey('--rpm', '5', '--rpd', '100000')).key;
    const day = (await createKey('--rpm', '5', '--rpd', '5')).key;
    await spend(minute, 5);
    await spend(day, 5);
    for (const seconds of [DAY_S, 0, -HOUR_S, 0]) {
      await step(seconds, minute);
      const m = await send(minute);
      assert.equal(m.status, 429, `the minute reopened at ${seconds} s`);
      assert.ok(m.retryAfter >= 1 && m.retryAfter <= 60, `the minute's Retry-After at ${seconds} s: ${m.retryAfter}`);
      const d = await send(day);
      assert.equal(d.status, 429, `the day reopened at ${seconds} s`);
      assert.ok(d.retryAfter <= DAY_S, `the day's Retry-After at ${seconds} s: ${d.retryAfter}`);
    }
  });

  test('with the clock an hour behind, revocation and a plan change arrive within the key cache TTL', async (t) => {
    atEnd(t, () => writeFileSync(offsetFile, '+0'));
    const revoked = await createKey('--rpm', '1000', '--rpd', '100000');
    const replanned = await createKey('--rpm', '1000', '--rpd', '100000');
    await spend(revoked.key, 1);
    assert.equal((await send(replanned.key)).limit, 1000);
    await step(-HOUR_S, revoked.key);
    assert.equal((await runCli(['keys', 'revoke', revoked.id], env)).code, 0);
    assert.equal((await runCli(['keys', 'plan', replanned.id, '--plan', 'free'], env)).code, 0);
    await eventually(async () => (await send(revoked.key)).status === 401, KEY_CACHE_TTL_MS + 3000);
    await eventually(async () => (await send(replanned.key)).limit === 60, KEY_CACHE_TTL_MS + 3000);
  });

  /** Spends the key's minute, then sends on past the grace until it is banned; the ban's answer. */
  async function earnBan(key: string): Promise<Answer> {
    await spend(key, 2);
    assert.equal((await send(key)).status, 429);
    await sleep(1100); // past the ban grace: refusals from now on count
    for (let i = 0; i < 3; i++) await send(key);
    const banned = await send(key);
    assert.equal(banned.code, 'key_banned');
    return banned;
  }

  test('a ban lasts its length of real time with the clock an hour behind, or ahead', async (t) => {
    atEnd(t, () => writeFileSync(offsetFile, '+0'));
    const { key } = await createKey('--rpm', '2', '--rpd', '100000');
    const banned = await earnBan(key);
    const endsAt = Date.now() + banned.retryAfter * 1000;
    await step(-HOUR_S, key);
    const behind = await send(key);
    assert.equal(behind.code, 'key_banned');
    assert.ok(behind.retryAfter <= BAN_SECONDS, `Retry-After ${behind.retryAfter} with the clock an hour behind`);
    await step(HOUR_S, key);
    assert.equal((await send(key)).code, 'key_banned', 'not lifted by a clock an hour ahead');
    await sleep(Math.max(0, endsAt - Date.now()) + 1500);
    assert.notEqual((await send(key)).code, 'key_banned', 'over once its real length has passed');
  });

  test('with the clock an hour behind, an unban arrives within 5 s', async (t) => {
    atEnd(t, () => writeFileSync(offsetFile, '+0'));
    const { id, key } = await createKey('--rpm', '2', '--rpd', '100000');
    await earnBan(key);
    await step(-HOUR_S, key);
    assert.equal((await runCli(['keys', 'unban', id], env)).code, 0);
    await eventually(async () => (await send(key)).code !== 'key_banned', 5000);
  });

  test('an Idempotency-Key claim survives a day forward and back: one pet', async (t) => {
    atEnd(t, () => writeFileSync(offsetFile, '+0'));
    const { key } = await createKey('--rpm', '1000', '--rpd', '100000');
    const pet = { name: 'Stepped over', categoryId: 2 };
    const first = await send(key, 'POST', '/v1/pets', { body: pet, idempotencyKey: 'jump-1' });
    assert.equal(first.status, 201);
    for (const seconds of [DAY_S + 60, 0]) {
      await step(seconds, key);
      const again = await send(key, 'POST', '/v1/pets', { body: pet, idempotencyKey: 'jump-1' });
      assert.equal(again.status, 201);
      assert.ok(again.replayed, `a second pet at ${seconds} s`);
      assert.equal(again.id, first.id);
    }
  });

  test('an unfinished claim stamped an hour ahead of the server is taken over within seconds, not an hour', async (t) => {
    atEnd(t, () => writeFileSync(offsetFile, '+0'));
    const { id, key } = await createKey('--rpm', '1000', '--rpd', '100000');
    const pet = { name: 'Crashed', categoryId: 3, status: 'available' as const };
    // A create that claimed the key and died before finishing, on the real clock.
    const db = new DatabaseSync(database);
    db.exec('PRAGMA busy_timeout = 5000');
    const hashed = requestHash({ name: pet.name, categoryId: 3n, status: pet.status });
    db.prepare('INSERT INTO idempotency_keys (key_id, idempotency_key, request_hash, created_at, claim_token) VALUES (?, ?, ?, ?, ?)').run(
      id,
      'crashed-1',
      hashed,
      Date.now(),
      'dead',
    );
    db.close();
    await step(-HOUR_S, key);
    const held = await send(key, 'POST', '/v1/pets', { body: pet, idempotencyKey: 'crashed-1' });
    assert.equal(held.status, 409);
    assert.ok(held.retryAfter >= 1 && held.retryAfter <= 5, `Retry-After ${held.retryAfter}`);
    let created: Answer | undefined;
    await eventually(async () => {
      const retry = await send(key, 'POST', '/v1/pets', { body: pet, idempotencyKey: 'crashed-1' });
      if (retry.status === 201) created = retry;
      return created !== undefined;
    }, 10_000);
    assert.equal(created!.replayed, false);
  });
});
