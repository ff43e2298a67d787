/**
 * The operator's key lifecycle as callers see it: a rotated key and its replacement both work during
 * the grace period and only the replacement after it, sharing one minute, one day and one ban (the
 * operator's unban of either lifts it for both); an expired key gets 401 saying when it expired,
 * at the exact moment even while the key is cached; a plan change shows in the limits within the
 * cache TTL. And an unknown key and a wrong key (right prefix and format, wrong secret) are answered
 * identically, at the same cost.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { changePlan, listKeys, rotateKey, setExpiry, unbanKey } from '../../src/cli/keys.ts';
import { call, createUntaggedKey, errorOf, startTestServer, type TestServer } from '../support/servers.ts';

const keyIdOf = async (server: TestServer, prefixOf: string) =>
  (await server.store.listKeys()).find((k) => prefixOf.startsWith(k.prefix))!.id;

/** Sends n requests one after another with the key; their statuses and the last response. */
async function spend(server: TestServer, key: string, n: number) {
  const statuses: number[] = [];
  let last: Awaited<ReturnType<typeof call>> | undefined;
  for (let i = 0; i < n; i++) {
    last = await call(server, 'GET', '/v1/pets', { key });
    statuses.push(last.status);
  }
  return { statuses, last: last! };
}

const remaining = (res: { headers: Headers }) => res.headers.get('x-ratelimit-remaining');

describe('key lifecycle', () => {
  test('rotation: both keys work during the grace period, only the new one after it', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const old = await server.key('pro');
    const id = await keyIdOf(server, old);
    const { key: fresh, record, retired } = await rotateKey(server.store, id, '90s', server.clock.now());
    assert.equal(record.plan, 'pro');
    assert.equal(retired.expiresAt!.getTime(), server.clock.now() + 90_000);

    server.clock.advance(2001); // past the key cache TTL
    assert.equal((await call(server, 'GET', '/v1/pets', { key: old })).status, 200);
    assert.equal((await call(server, 'GET', '/v1/pets', { key: fresh })).status, 200);

    server.clock.advance(90_000);
    const expired = await call(server, 'GET', '/v1/pets', { key: old });
    assert.equal(expired.status, 401);
    assert.equal(expired.json.code, 'unauthorized');
    assert.match(expired.json.message, new RegExp(`expired at ${retired.expiresAt!.toISOString()}`));
    assert.equal((await call(server, 'GET', '/v1/pets', { key: fresh })).status, 200);
  });

  test('a key issued before tags keeps working, and rotating it issues a tagged key that shares its minute', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const old = await createUntaggedKey(server.store, 'production', 'pro');
    assert.equal(remaining(await call(server, 'GET', '/v1/pets', { key: old })), '299');
    const { key: fresh } = await rotateKey(server.store, await keyIdOf(server, old), '1h', server.clock.now());
    assert.equal(fresh.length, old.length + 11, 'the replacement ends in a tag');
    assert.equal(remaining(await call(server, 'GET', '/v1/pets', { key: fresh })), '298');
    server.clock.advance(2001); // past the key cache TTL
    assert.equal(remaining(await call(server, 'GET', '/v1/pets', { key: old })), '297', 'the old key during its grace period');
  });

  test('a rotated key goes on from the minute the old key spent: 50 of 60 spent, 10 left, then 429 for both', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const old = await server.key('free');
    const spent = await spend(server, old, 50);
    assert.deepEqual(new Set(spent.statuses), new Set([200]));
    assert.equal(remaining(spent.last), '10');

    const { key: fresh, record } = await rotateKey(server.store, await keyIdOf(server, old), '1h', server.clock.now());
    assert.equal(record.subjectId, await keyIdOf(server, old));
    const first = await call(server, 'GET', '/v1/pets', { key: fresh });
    assert.equal(first.status, 200);
    assert.equal(remaining(first), '9', 'the new key counts on from the old one');
    const rest = await spend(server, fresh, 9);
    assert.deepEqual(new Set(rest.statuses), new Set([200]));
    assert.equal(remaining(rest.last), '0');
    errorOf(await call(server, 'GET', '/v1/pets', { key: fresh }), 429, 'rate_limited');
    errorOf(await call(server, 'GET', '/v1/pets', { key: old }), 429, 'rate_limited');

    // A new minute is one minute for both keys: 60 between them.
    server.clock.advance(60_000);
    assert.deepEqual(new Set((await spend(server, old, 30)).statuses), new Set([200]));
    const after = await spend(server, fresh, 31);
    assert.deepEqual(after.statuses, [...Array(30).fill(200), 429]);
  });

  test('a rotated key goes on from the day the old key spent, and a rotation of the rotation too', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const old = await server.key('enterprise', { rpm: 10, rpd: 25 });
    assert.deepEqual(new Set((await spend(server, old, 10)).statuses), new Set([200]));
    server.clock.advance(60_000);
    const spent = await spend(server, old, 10);
    assert.deepEqual(new Set(spent.statuses), new Set([200]));
    assert.equal(remaining(spent.last), '0', 'the minute is spent');

    server.clock.advance(60_000); // a fresh minute; 20 of the day's 25 spent
    const { key: second } = await rotateKey(server.store, await keyIdOf(server, old), '1h', server.clock.now());
    const first = await call(server, 'GET', '/v1/pets', { key: second });
    assert.equal(first.status, 200);
    assert.equal(remaining(first), '4', 'the day window, nearest exhaustion, goes on from the old key');
    assert.equal(first.headers.get('x-ratelimit-limit'), '25');

    // The replacement of the replacement is the same subject still.
    const { key: third, record } = await rotateKey(server.store, await keyIdOf(server, second), '1h', server.clock.now());
    assert.equal(record.subjectId, await keyIdOf(server, old));
    assert.deepEqual((await spend(server, third, 4)).statuses, [200, 200, 200, 200]);
    for (const key of [third, second, old]) {
      const refused = errorOf(await call(server, 'GET', '/v1/pets', { key }), 429, 'rate_limited');
      assert.match(refused.message, /per day/);
    }
  });

  test('rotating a banned key gives a banned key; unbanning the new key lifts the ban for both', async (t) => {
    const server = await startTestServer({ banThreshold: 2, banGraceMs: 0 });
    t.after(() => server.close());
    const old = await server.key('enterprise', { rpm: 2, rpd: 1000 });
    const oldId = await keyIdOf(server, old);
    assert.deepEqual((await spend(server, old, 4)).statuses, [200, 200, 429, 429]); // the second refusal bans
    const banEnd = await server.store.banEndOf(oldId, server.clock.now());
    assert.ok(banEnd !== undefined);

    const { key: fresh, record, bannedUntilMs } = await rotateKey(server.store, oldId, '1h', server.clock.now());
    assert.equal(bannedUntilMs, banEnd, 'rotate reports the ban the new key shares');
    server.clock.advance(60_000); // a new minute: only the ban refuses
    for (const key of [fresh, old]) {
      const res = await call(server, 'GET', '/v1/pets', { key });
      errorOf(res, 429, 'key_banned');
      assert.equal(remaining(res), '0', 'the headers describe the ban');
      const retryAfter = Number(res.headers.get('retry-after'));
      assert.ok(Math.abs(retryAfter - (banEnd - server.clock.now()) / 1000) <= 1, `Retry-After ${retryAfter} is until the ban's end`);
    }
    const listed = await listKeys(server.store, server.clock.now());
    assert.deepEqual(
      [oldId, record.id].map((id) => listed.find((k) => k.id === id)?.bannedUntil),
      [new Date(banEnd).toISOString(), new Date(banEnd).toISOString()],
      'keys list shows both keys banned',
    );

    const sharing = await unbanKey(server.store, record.id, server.clock.now());
    assert.deepEqual(
      sharing.map((k) => k.id),
      [oldId],
    );
    assert.deepEqual(
      (await listKeys(server.store, server.clock.now())).map((k) => k.bannedUntil),
      [null, null],
    );
    server.clock.advance(2001); // past the ban cache
    const served = await call(server, 'GET', '/v1/pets', { key: fresh });
    assert.equal(served.status, 200);
    assert.equal(remaining(served), '1', "the new minute's quota, untouched while banned");
    assert.equal((await call(server, 'GET', '/v1/pets', { key: old })).status, 200);
    errorOf(await call(server, 'GET', '/v1/pets', { key: fresh }), 429, 'rate_limited');
  });

  test("a ban earned with the new key bans the old one during its grace period, and the old key's unban lifts it", async (t) => {
    const server = await startTestServer({ banThreshold: 2, banGraceMs: 0 });
    t.after(() => server.close());
    const old = await server.key('enterprise', { rpm: 2, rpd: 1000 });
    const oldId = await keyIdOf(server, old);
    const { key: fresh } = await rotateKey(server.store, oldId, '1h', server.clock.now());
    assert.deepEqual((await spend(server, fresh, 4)).statuses, [200, 200, 429, 429]);
    errorOf(await call(server, 'GET', '/v1/pets', { key: old }), 429, 'key_banned');
    await unbanKey(server.store, oldId, server.clock.now());
    server.clock.advance(60_000);
    assert.equal((await call(server, 'GET', '/v1/pets', { key: fresh })).status, 200);
    assert.equal((await call(server, 'GET', '/v1/pets', { key: old })).status, 200);
  });

  test('an expiry takes effect at its exact moment, even while the key is cached', async (t) => {
    const server = await startTestServer({ keyCacheTtlMs: 5000 });
    t.after(() => server.close());
    const key = await server.key('free');
    const id = await keyIdOf(server, key);
    const at = new Date(server.clock.now() + 10_000).toISOString();
    await setExpiry(server.store, id, at, false);
    server.clock.advance(6000); // the cache now holds the key with its expiry
    assert.equal((await call(server, 'GET', '/v1/pets', { key })).status, 200);
    server.clock.advance(3999); // 1 ms before the expiry, still cached
    assert.equal((await call(server, 'GET', '/v1/pets', { key })).status, 200);
    server.clock.advance(1);
    const refused = await call(server, 'GET', '/v1/pets', { key });
    assert.equal(refused.status, 401);
    assert.match(refused.json.message, /expired at/);

    await setExpiry(server.store, id, undefined, true); // --never
    server.clock.advance(5001);
    assert.equal((await call(server, 'GET', '/v1/pets', { key })).status, 200);
  });

  test('a plan change shows in the limits within the cache TTL', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const key = await server.key('free');
    assert.equal((await call(server, 'GET', '/v1/pets', { key })).headers.get('x-ratelimit-limit'), '60');
    await changePlan(server.store, await keyIdOf(server, key), { plan: 'enterprise', rpm: '5000', rpd: '100000' });
    server.clock.advance(2001);
    assert.equal((await call(server, 'GET', '/v1/pets', { key })).headers.get('x-ratelimit-limit'), '5000');
  });
});

describe('constant-time verification', () => {
  test('an unknown key and a wrong key are answered identically and cost the same', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const real = await server.key('enterprise', { rpm: 1_000_000, rpd: 10_000_000 });
    // Same prefix and format as the real key, differing only in the last character: a "wrong" key.
    const wrong = real.slice(0, -1) + (real.endsWith('A') ? 'B' : 'A');
    const unknown = 'pet_live_' + 'Q'.repeat(real.length - 'pet_live_'.length);
    const comparable = (res: Awaited<ReturnType<typeof call>>) => {
      // The reset differs by the minute advanced between the two calls; everything else must match.
      const headers = Object.fromEntries([...res.headers].filter(([h]) => !['date', 'x-request-id', 'x-ratelimit-reset'].includes(h)));
      const { requestId: _ignored, ...body } = res.json;
      return { status: res.status, headers, body };
    };
    // Both from a fresh address window, so their rate-limit headers match too.
    const a = comparable(await call(server, 'GET', '/v1/pets', { key: unknown }));
    server.clock.advance(60_000);
    const b = comparable(await call(server, 'GET', '/v1/pets', { key: wrong }));
    assert.deepEqual(a, b);

    // Latency: interleaved, a few hundred each. Both take the same path (the presented key's tag
    // computed and compared in constant time, refused without a lookup); the bound of 1 ms is far above what a byte-by-byte
    // comparison could show and far below what a loaded machine's noise could make flaky over medians.
    const times = { unknown: [] as number[], wrong: [] as number[] };
    for (let i = 0; i < 300; i++) {
      for (const [name, key] of [
        ['unknown', unknown],
        ['wrong', wrong],
      ] as const) {
        server.clock.advance(60_000); // stay clear of the per-address limit
        const started = performance.now();
        await call(server, 'GET', '/v1/pets', { key });
        times[name].push(performance.now() - started);
      }
    }
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
    const gap = Math.abs(median(times.unknown) - median(times.wrong));
    assert.ok(gap < 1, `medians differ by ${gap.toFixed(3)} ms`);
  });
});
