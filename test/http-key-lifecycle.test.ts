/**
 * The operator's key lifecycle as callers see it: a rotated key and its replacement both work during
 * the grace period and only the replacement after it; an expired key gets 401 saying when it expired,
 * at the exact moment even while the key is cached; a plan change shows in the limits within the
 * cache TTL. And an unknown key and a wrong key (right prefix and format, wrong secret) are answered
 * identically, at the same cost.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { changePlan, rotateKey, setExpiry } from '../src/cli/keys.ts';
import { call, startTestServer, type TestServer } from './support/servers.ts';

const keyIdOf = async (server: TestServer, prefixOf: string) =>
  (await server.store.listKeys()).find((k) => prefixOf.startsWith(k.prefix))!.id;

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

    // Latency: interleaved, a few hundred each. Both take the same path (SHA-256 of the presented
    // key, one indexed lookup that finds nothing); the bound of 1 ms is far above what a byte-by-byte
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
