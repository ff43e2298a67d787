/**
 * A ban placed by a clock a day ahead (docs/rate-limits.md, "A clock that jumps"): a SQLite server under
 * libfaketime at +1 day bans a key, so the ban's stored end is a day and a ban length away; it is stopped and
 * started again on the true clock, where the ban must end within twice its length of the request that earned
 * it, not a day later, and Retry-After and X-RateLimit-Reset must never promise more.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import { faketimeEnv, requireLibfaketime, skipWithoutLibfaketime } from '../support/faketime.ts';
import { keysCreateJson, startServerProcess, stopServer, type EnvOverrides, type ServerProcess } from '../support/processes.ts';
import { suiteOwner, tempDir } from '../support/temp.ts';

const DAY_S = 86_400;
const BAN_SECONDS = 4;

describe('a ban placed by a clock a day ahead, after a restart on the true clock', { skip: skipWithoutLibfaketime() }, () => {
  const suite = suiteOwner();
  let env: EnvOverrides;
  let offsetFile: string;
  let database: string;

  before(() => {
    requireLibfaketime();
    const dir = tempDir(suite);
    database = join(dir, 'petstore.db');
    offsetFile = join(dir, 'faketime');
    // A grace of 0 and a threshold of 1: the first refusal bans.
    env = { DATABASE_URL: `sqlite:${database}`, LOG_LEVEL: 'warn', BAN_THRESHOLD: '1', BAN_GRACE_MS: '0' };
    env.BAN_DURATION_SECONDS = String(BAN_SECONDS);
    env.KEY_CACHE_TTL_MS = '1000';
  });

  async function send(server: ServerProcess, key: string) {
    const res = await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
    const body = (await res.json()) as { code?: string };
    return {
      code: res.status === 429 ? body.code : undefined,
      retryAfter: Number(res.headers.get('retry-after')),
      resetS: Number(res.headers.get('x-ratelimit-reset')),
      serverNowS: Date.parse(res.headers.get('date')!) / 1000,
    };
  }

  test('ends within twice its length of real time, and the headers never promise more', async () => {
    const { key, id } = await keysCreateJson(env, '--plan', 'enterprise', '--rpm', '1', '--rpd', '100000');
    writeFileSync(offsetFile, `+${DAY_S}`);
    const ahead = await startServerProcess({ ...env, ...faketimeEnv(offsetFile) }, { owner: suite });
    const admitted = await send(ahead, key);
    assert.equal(admitted.code, undefined);
    assert.ok(
      Math.abs(admitted.serverNowS - Date.now() / 1000 - DAY_S) < 5,
      `the server's clock is not a day ahead: ${admitted.serverNowS}`,
    );
    const bannedAtMs = Date.now();
    assert.equal((await send(ahead, key)).code, 'rate_limited', 'the refusal that earns the ban');
    assert.equal((await send(ahead, key)).code, 'key_banned');
    await stopServer(ahead);

    const db = new DatabaseSync(database, { readOnly: true });
    const stored = Number((db.prepare('SELECT banned_until FROM bans WHERE key_id = ?').get(id) as { banned_until: number }).banned_until);
    db.close();
    assert.ok(stored - Date.now() > DAY_S * 1000 - 60_000, `the stored end is a day ahead: ${new Date(stored).toISOString()}`);

    const trueClock = await startServerProcess(env, { owner: suite });
    const first = await send(trueClock, key);
    assert.equal(first.code, 'key_banned', 'still banned after the restart');
    assert.ok(Math.abs(first.serverNowS - Date.now() / 1000) < 5, 'the restarted server runs on the true clock');
    assert.ok(first.retryAfter >= 1 && first.retryAfter <= BAN_SECONDS, `Retry-After ${first.retryAfter}`);
    assert.ok(first.resetS <= Math.ceil(Date.now() / 1000) + BAN_SECONDS + 1, `X-RateLimit-Reset ${first.resetS} is more than a ban away`);
    let endedAtMs: number | undefined;
    while (endedAtMs === undefined && Date.now() - bannedAtMs < 3 * BAN_SECONDS * 1000) {
      const answer = await send(trueClock, key);
      if (answer.code === 'key_banned') {
        assert.ok(answer.retryAfter <= BAN_SECONDS, `Retry-After ${answer.retryAfter}`);
        assert.ok(answer.resetS <= Math.ceil(Date.now() / 1000) + BAN_SECONDS + 1, `X-RateLimit-Reset ${answer.resetS}`);
      } else endedAtMs = Date.now();
      await sleep(100);
    }
    assert.ok(endedAtMs !== undefined, `still banned ${Date.now() - bannedAtMs} ms after the ban was earned`);
    // Twice its length, plus the whole second a ban's end is rounded to, twice, and a poll.
    assert.ok(endedAtMs - bannedAtMs <= 2 * BAN_SECONDS * 1000 + 2500, `ended ${endedAtMs - bannedAtMs} ms after it was earned`);
    // Read from the store again (past the cache), it stays over though its stored end is still a day away.
    await sleep(1500);
    assert.notEqual((await send(trueClock, key)).code, 'key_banned', 'banned again when read again');
  });
});
