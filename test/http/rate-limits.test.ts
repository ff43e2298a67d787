/** Plans, both windows, headers, 429, bans and the per-address limit, through real HTTP and a fake clock. */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import { ENGINE } from '../support/engines.ts';
import { call, errorOf, startTestServer, type TestServer } from '../support/servers.ts';
import { MINUTE_MS } from '../../src/domain/durations.ts';
import { undoAll } from '../support/temp.ts';

const servers: TestServer[] = [];
async function server(...args: Parameters<typeof startTestServer>): Promise<TestServer> {
  const s = await startTestServer(...args);
  servers.push(s);
  return s;
}
afterEach(async () => {
  // The last started first, each whether or not another's close failed.
  await undoAll(servers.splice(0).map((s) => () => s.close()));
});

/** Sends n requests one after another and returns their statuses. */
async function burst(s: TestServer, n: number, key?: string, headers?: Record<string, string>): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) statuses.push((await call(s, 'GET', '/v1/pets', { key, headers })).status);
  return statuses;
}

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

describe('windows', () => {
  test('a Free key gets exactly 60 requests a minute, then 429 rate_limited until the minute turns', async () => {
    const s = await server();
    const key = await s.key('free');
    s.clock.ms = Date.UTC(2026, 10, 22, 12, 0, 30, 250);
    const statuses = await burst(s, 65, key);
    assert.equal(count(statuses, 200), 60);
    assert.deepEqual(statuses.slice(60), [429, 429, 429, 429, 429]);
    const refused = await call(s, 'GET', '/v1/pets', { key });
    errorOf(refused, 429, 'rate_limited');
    assert.equal(refused.headers.get('retry-after'), '30'); // 29.75 s rounded up
    assert.equal(refused.headers.get('x-ratelimit-reset'), String(Date.UTC(2026, 10, 22, 12, 1) / 1000));
    assert.equal(refused.headers.get('x-ratelimit-remaining'), '0');
    s.clock.ms = Date.UTC(2026, 10, 22, 12, 0, 59, 999);
    assert.equal((await call(s, 'GET', '/v1/pets', { key })).status, 429);
    s.clock.ms = Date.UTC(2026, 10, 22, 12, 1, 0, 0);
    const next = await call(s, 'GET', '/v1/pets', { key });
    assert.equal(next.status, 200);
    assert.equal(next.headers.get('x-ratelimit-remaining'), '59');
  });

  test('refused requests consume nothing: the day window counts only the 60 admitted', async () => {
    const s = await server({ banThreshold: 1000 });
    const key = await s.key('free');
    await burst(s, 80, key);
    s.clock.advance(MINUTE_MS);
    const res = await call(s, 'GET', '/v1/pets', { key });
    assert.match(res.headers.get('ratelimit')!, /"day";r=939;/);
  });

  test('the day window is enforced too, resets at midnight UTC, and shows when it is nearest exhaustion', async () => {
    const s = await server();
    // A day's limit below a minute's is refused as nonsense; equal ones still let the day run out first.
    const key = await s.key('enterprise', { rpm: 5, rpd: 5 });
    s.clock.ms = Date.UTC(2026, 10, 22, 23, 0, 0);
    const first = await call(s, 'GET', '/v1/pets', { key });
    assert.equal(first.headers.get('x-ratelimit-limit'), '5'); // a tie goes to the longer window: the day
    assert.equal(first.headers.get('x-ratelimit-remaining'), '4');
    const midnight = Date.UTC(2026, 10, 23) / 1000;
    assert.equal(first.headers.get('x-ratelimit-reset'), String(midnight));
    assert.equal(first.headers.get('ratelimit-policy'), '"minute";q=5;w=60, "day";q=5;w=86400');
    assert.equal(first.headers.get('ratelimit'), '"minute";r=4;t=60, "day";r=4;t=3600');
    await burst(s, 4, key);
    s.clock.advance(5 * MINUTE_MS); // a new minute does not help
    const refused = await call(s, 'GET', '/v1/pets', { key });
    errorOf(refused, 429, 'rate_limited');
    assert.match(refused.json.message, /per day/);
    assert.equal(refused.headers.get('retry-after'), String(midnight - s.clock.now() / 1000));
    assert.equal(
      Number(refused.headers.get('x-ratelimit-reset')),
      Math.floor(s.clock.now() / 1000) + Number(refused.headers.get('retry-after')),
    );
    s.clock.ms = Date.UTC(2026, 10, 23);
    assert.equal((await call(s, 'GET', '/v1/pets', { key })).status, 200);
  });

  test('when both windows are exhausted, the headers and Retry-After name the longer one', async () => {
    const s = await server();
    const key = await s.key('enterprise', { rpm: 3, rpd: 3 });
    s.clock.ms = Date.UTC(2026, 10, 22, 12, 0, 0);
    await burst(s, 3, key);
    const refused = await call(s, 'GET', '/v1/pets', { key });
    assert.equal(refused.headers.get('x-ratelimit-reset'), String(Date.UTC(2026, 10, 23) / 1000));
    assert.equal(refused.headers.get('retry-after'), String(12 * 3600));
  });

  test('every plan enforces its own figures', async () => {
    const s = await server({ banThreshold: 100_000 });
    for (const [plan, perMinute] of [
      ['pro', 300],
      ['business', 1000],
    ] as const) {
      const key = await s.key(plan);
      const statuses = await burst(s, perMinute + 2, key);
      assert.equal(count(statuses, 200), perMinute, plan);
      assert.equal(count(statuses, 429), 2, plan);
    }
  });

  test('a burst of 150 concurrent requests with a Free key admits exactly 60', async () => {
    const s = await server();
    const key = await s.key('free');
    const answers = await Promise.all(Array.from({ length: 150 }, () => call(s, 'GET', '/v1/pets', { key })));
    assert.equal(
      count(
        answers.map((a) => a.status),
        200,
      ),
      60,
    );
    assert.equal(
      count(
        answers.map((a) => a.status),
        429,
      ),
      90,
    );
    for (const a of answers.filter((x) => x.status === 429)) assert.ok(['rate_limited', 'key_banned'].includes(a.json.code));
  });

  test('concurrent creates beyond the limit store exactly what was admitted', async () => {
    const s = await server();
    const key = await s.key('enterprise', { rpm: 25, rpd: 1000 });
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => call(s, 'POST', '/v1/pets', { key, body: { name: `p${i}`, categoryId: 1 } })),
    );
    assert.equal(
      count(
        answers.map((a) => a.status),
        201,
      ),
      25,
    );
    assert.equal((await s.store.listPets({ status: undefined, afterId: undefined, limit: 100 })).length, 25);
  });
});

describe('bans', () => {
  test('a burst at the limit bans nothing: refusals within BAN_GRACE_MS of the first were already in flight', async () => {
    const s = await server();
    const key = await s.key('free');
    s.clock.ms = Date.UTC(2026, 10, 22, 12, 0, 10);
    // 100 concurrent requests on a new Free key: 60 admitted, 40 refused, all in the same instant.
    const answers = await Promise.all(Array.from({ length: 100 }, () => call(s, 'GET', '/v1/pets', { key })));
    assert.equal(
      count(
        answers.map((a) => a.status),
        200,
      ),
      60,
    );
    assert.deepEqual([...new Set(answers.filter((a) => a.status === 429).map((a) => a.json.code))], ['rate_limited']);
    s.clock.advance(999);
    for (let i = 0; i < 30; i++) errorOf(await call(s, 'GET', '/v1/pets', { key }), 429, 'rate_limited');
    const [record] = await s.store.listKeys();
    assert.equal(await s.store.banEndOf(record!.id, s.clock.now()), undefined);
    s.clock.advance(50_000); // the next minute: the client that waited is served
    assert.equal((await call(s, 'GET', '/v1/pets', { key })).status, 200);
  });

  test("workers that wait out Retry-After are banned in no window: each window's grace counts from its own first refusal", async () => {
    const s = await server();
    const key = await s.key('free');
    s.clock.ms = Date.UTC(2026, 10, 22, 12, 0, 10);
    for (let window = 0; window < 3; window++) {
      // 100 workers at once: 60 served, 40 refused, each worker then sleeps its Retry-After.
      const answers = await Promise.all(Array.from({ length: 100 }, () => call(s, 'GET', '/v1/pets', { key })));
      const codes = answers.map((a) => (a.status === 200 ? 'ok' : a.json.code));
      assert.equal(codes.filter((c) => c === 'ok').length, 60, `window ${window}`);
      assert.deepEqual([...new Set(codes.filter((c) => c !== 'ok'))], ['rate_limited'], `window ${window}`);
      const retryAfter = Number(answers.find((a) => a.status === 429)!.headers.get('retry-after'));
      s.clock.advance(retryAfter * 1000);
    }
    const [record] = await s.store.listKeys();
    assert.equal(await s.store.banEndOf(record!.id, s.clock.now()), undefined);
  });

  test("a ban's X-RateLimit-Reset is the current second plus its Retry-After, whatever the millisecond", async () => {
    const s = await server();
    const key = await s.key('free');
    s.clock.ms = Date.UTC(2026, 10, 22, 12, 0, 10, 300);
    assert.equal(count(await burst(s, 70, key), 200), 60);
    s.clock.advance(1000);
    for (let i = 0; i < 20; i++) errorOf(await call(s, 'GET', '/v1/pets', { key }), 429, 'rate_limited');
    for (const step of [0, 457, 61_999]) {
      s.clock.advance(step);
      const banned = await call(s, 'GET', '/v1/pets', { key });
      errorOf(banned, 429, 'key_banned');
      const reset = Number(banned.headers.get('x-ratelimit-reset'));
      assert.equal(reset, Math.floor(s.clock.now() / 1000) + Number(banned.headers.get('retry-after')), `after ${step} ms`);
    }
  });

  test('a client that keeps sending after its 429 is banned for 15 minutes; every rate-limit header describes the ban', async () => {
    const logs: string[] = [];
    const s = await server({ logLevel: 'info' }, { onLog: (l) => logs.push(l) });
    const key = await s.key('free');
    s.clock.ms = Date.UTC(2026, 10, 22, 12, 0, 10);
    assert.equal(count(await burst(s, 70, key), 200), 60);
    s.clock.advance(1000); // BAN_GRACE_MS after the first refusal: from now on refusals count
    const codes: string[] = [];
    for (let i = 0; i < 21; i++) codes.push((await call(s, 'GET', '/v1/pets', { key })).json.code);
    assert.deepEqual(codes, [...Array(20).fill('rate_limited'), 'key_banned']);
    const banEnd = s.clock.now() + 900_000;
    const [record] = await s.store.listKeys();
    assert.equal(await s.store.banEndOf(record!.id, s.clock.now()), banEnd);
    assert.ok(
      logs.some((l) => /"msg":"key banned"/.test(l) && l.includes('"keyId":"key_')),
      'the ban is logged',
    );

    s.clock.advance(53_000); // a new minute window: the quota is back, the ban is not
    const banned = await call(s, 'GET', '/v1/pets', { key });
    errorOf(banned, 429, 'key_banned');
    const retryAfter = Number(banned.headers.get('retry-after'));
    assert.equal(retryAfter, 847);
    assert.equal(banned.headers.get('x-ratelimit-remaining'), '0', 'Remaining says nothing is left');
    assert.equal(Number(banned.headers.get('x-ratelimit-reset')), Math.ceil(banEnd / 1000), 'Reset is the end of the ban');
    assert.equal(banned.headers.get('ratelimit'), `"minute";r=0;t=${retryAfter}, "day";r=0;t=${retryAfter}`);
    assert.equal(banned.headers.get('ratelimit-policy'), '"minute";q=60;w=60, "day";q=1000;w=86400');
  });

  test('BAN_GRACE_MS=0 counts every refusal: exactly 20 are rate_limited, the next request is key_banned', async () => {
    const s = await server({ banGraceMs: 0 });
    const key = await s.key('free');
    const codes: string[] = [];
    for (let i = 0; i < 81; i++) {
      const res = await call(s, 'GET', '/v1/pets', { key });
      codes.push(res.status === 200 ? 'ok' : res.json.code);
    }
    assert.deepEqual(codes.slice(60, 81), [...Array(20).fill('rate_limited'), 'key_banned']);
  });

  test('a banned key is refused on every operation, even in a new minute, and its quota is untouched', async () => {
    const s = await server({ banThreshold: 2, banGraceMs: 0 });
    const key = await s.key('enterprise', { rpm: 2, rpd: 1000 });
    await burst(s, 4, key); // 2 admitted, 2 refused: banned
    s.clock.advance(MINUTE_MS);
    for (const [method, path, body] of [
      ['GET', '/v1/pets'],
      ['POST', '/v1/pets', { name: 'a', categoryId: 1 }],
      ['GET', '/v1/pets/1'],
    ] as const) {
      const res = await call(s, method, path, { key, body });
      errorOf(res, 429, 'key_banned');
      assert.equal(res.headers.get('x-ratelimit-remaining'), '0', 'the headers describe the ban');
    }
    assert.equal((await s.store.listPets({ status: undefined, afterId: undefined, limit: 10 })).length, 0);
    // The ban lifted, the quota of this minute is whole: the banned requests consumed nothing.
    const [record] = await s.store.listKeys();
    assert.ok(await s.store.liftBan(record!.id, s.clock.now()));
    s.clock.advance(2001); // past the ban cache
    const served = await call(s, 'GET', '/v1/pets', { key });
    assert.equal(served.status, 200);
    assert.equal(served.headers.get('x-ratelimit-remaining'), '1');
  });

  test('a ban ends by itself after BAN_DURATION_SECONDS', async () => {
    const s = await server({ banThreshold: 1, banDurationSeconds: 120, banGraceMs: 0 });
    const key = await s.key('enterprise', { rpm: 1, rpd: 1000 });
    await burst(s, 2, key);
    const banned = await call(s, 'GET', '/v1/pets', { key });
    errorOf(banned, 429, 'key_banned');
    assert.equal(banned.headers.get('retry-after'), '120');
    s.clock.advance(119_999);
    errorOf(await call(s, 'GET', '/v1/pets', { key }), 429, 'key_banned');
    s.clock.advance(1);
    assert.equal((await call(s, 'GET', '/v1/pets', { key })).status, 200);
  });

  test('lifting a ban in the database (petstore keys unban) takes effect within the cache TTL', async () => {
    const s = await server({ banThreshold: 1, banGraceMs: 0 });
    const key = await s.key('enterprise', { rpm: 1, rpd: 1000 });
    await burst(s, 2, key);
    errorOf(await call(s, 'GET', '/v1/pets', { key }), 429, 'key_banned');
    const [record] = await s.store.listKeys();
    assert.ok(await s.store.liftBan(record!.id, s.clock.now()));
    s.clock.advance(MINUTE_MS); // the cache TTL (2 s) has passed and the minute window has turned
    assert.equal((await call(s, 'GET', '/v1/pets', { key })).status, 200);
  });

  test('a ban the store cannot take still answers the 429 that earned it, and holds on this instance', async (t) => {
    const s = await server({ banThreshold: 1, banGraceMs: 0 });
    const key = await s.key('enterprise', { rpm: 1, rpd: 1000 });
    assert.equal((await call(s, 'GET', '/v1/pets', { key })).status, 200); // its ban state is now in memory
    const release = await holdBansTable(s);
    t.after(release);
    const refused = await call(s, 'GET', '/v1/pets', { key });
    errorOf(refused, 429, 'rate_limited');
    errorOf(await call(s, 'GET', '/v1/pets', { key }), 429, 'key_banned');
    await release();
    s.clock.advance(2001); // past the ban cache: the store, which has no ban, is read again
    errorOf(await call(s, 'GET', '/v1/pets', { key }), 429, 'key_banned');
  });

  test('a ban is seen by another instance on the same database', async () => {
    const a = await server({ banThreshold: 1, banGraceMs: 0 });
    const b = await server({ banThreshold: 1, banGraceMs: 0 }, { databaseOf: a });
    const key = await a.key('enterprise', { rpm: 1, rpd: 1000 });
    assert.equal((await call(b, 'GET', '/v1/pets', { key })).status, 200);
    await burst(a, 2, key);
    b.clock.advance(2001); // past b's ban cache entry
    errorOf(await call(b, 'GET', '/v1/pets', { key }), 429, 'key_banned');
  });
});

describe('requests without a valid key', () => {
  test('are limited per client address, with their own headers, without touching valid keys', async () => {
    const s = await server();
    const key = await s.key('free');
    const statuses = await burst(s, 62);
    assert.equal(count(statuses, 401), 60);
    assert.equal(count(statuses, 429), 2);
    const refused = await call(s, 'GET', '/v1/pets', { key: 'pet_live_guess' });
    errorOf(refused, 429, 'rate_limited');
    assert.equal(refused.headers.get('x-ratelimit-limit'), '60');
    assert.equal(refused.headers.get('ratelimit-policy'), '"minute";q=60;w=60');
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    const valid = await call(s, 'GET', '/v1/pets', { key });
    assert.equal(valid.status, 200);
    assert.equal(valid.headers.get('x-ratelimit-remaining'), '59');
  });

  test('X-Forwarded-For is ignored unless TRUST_PROXY says to believe it', async () => {
    const untrusting = await server({ anonymousPerMinute: 2 });
    const spoofed = await Promise.all(
      ['1.1.1.1', '2.2.2.2', '3.3.3.3'].map((ip) => burst(untrusting, 1, undefined, { 'x-forwarded-for': ip })),
    );
    assert.deepEqual(spoofed.flat(), [401, 401, 429]);

    // Behind one proxy (TRUST_PROXY=1), the entry it appended (the rightmost) is the client; what the
    // client wrote to its left is not believed.
    const oneHop = await server({ anonymousPerMinute: 2, trustProxy: loadConfig({ TRUST_PROXY: '1' }).trustProxy });
    for (const ip of ['1.1.1.1', '2.2.2.2', '::ffff:3.3.3.3']) {
      assert.deepEqual(await burst(oneHop, 3, undefined, { 'x-forwarded-for': `9.9.9.9, ${ip}` }), [401, 401, 429], ip);
    }
    // The same client written another way is the same bucket: 3.3.3.3 was spent above as ::ffff:3.3.3.3.
    assert.deepEqual(await burst(oneHop, 1, undefined, { 'x-forwarded-for': '3.3.3.3' }), [429]);
    // One IPv6 client is one /64, whichever address of it it uses.
    assert.deepEqual(
      await Promise.all(
        ['2001:db8:1:2::1', '2001:db8:1:2::2', '2001:db8:1:2:ffff::3'].map((ip) => burst(oneHop, 1, undefined, { 'x-forwarded-for': ip })),
      ).then((r) => r.flat().sort()),
      [401, 401, 429],
    );

    // With the proxies' addresses listed, entries are believed only while they come from one of them.
    const listed = await server({ anonymousPerMinute: 2, trustProxy: loadConfig({ TRUST_PROXY: '127.0.0.1, 10.0.0.0/8' }).trustProxy });
    assert.deepEqual(await burst(listed, 3, undefined, { 'x-forwarded-for': '4.4.4.4, 10.1.2.3' }), [401, 401, 429]);
    assert.deepEqual(
      await burst(listed, 1, undefined, { 'x-forwarded-for': '5.5.5.5, 4.4.4.4, 10.1.2.3' }),
      [429],
      'what 4.4.4.4 wrote is not believed',
    );
  });

  test('ANONYMOUS_RATE_LIMIT_PER_MINUTE sets the figure', async () => {
    const s = await server({ anonymousPerMinute: 5 });
    const res = await call(s, 'GET', '/v1/pets');
    assert.equal(res.headers.get('x-ratelimit-limit'), '5');
    assert.deepEqual(await burst(s, 5), [401, 401, 401, 401, 429]);
  });
});

/** Holds the bans table against writes from another connection, as another process or a migration would; the release. */
async function holdBansTable(s: TestServer): Promise<() => Promise<void>> {
  if (ENGINE === 'sqlite') {
    const db = new DatabaseSync(s.databaseUrl.replace(/^sqlite:/, ''));
    db.exec('BEGIN IMMEDIATE');
    return async () => {
      if (db.isOpen) db.close();
    };
  }
  const client = new pg.Client({ connectionString: s.databaseUrl });
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE bans IN EXCLUSIVE MODE');
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    await client.query('ROLLBACK');
    await client.end();
  };
}
