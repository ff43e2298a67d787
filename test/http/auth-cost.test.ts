/**
 * What authentication costs the store: a made-up key whose tag does not pass costs no lookup at all,
 * untagged made-up keys past their address's limit cost none, an unknown key is looked up once while it
 * is remembered, concurrent requests for one key share one lookup, and a valid key new to the instance
 * works from a spent address, whatever made-up keys it sent. Lookups are counted by the service's own
 * metric (exact, on every engine) and, on PostgreSQL, by the database's transaction count.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { call, createUntaggedKey, errorOf, startTestServer, type TestServer } from '../support/servers.ts';
import { ENGINE, POSTGRES_URL, withPostgres } from '../support/engines.ts';
import { eventually } from '../support/waiting.ts';

const TOKEN = 'metrics-token-0123456789';
/** KEY_CACHE_TTL_MS's default: how long a key, found or unknown, is remembered. */
const KEY_TTL_MS = 2000;
/** Transactions of a new database before any request: migrations, the cursor secret, a key or two. */
const SETUP_TRANSACTIONS = 15;

/** A key of the shape issued before tags (no tag), that was never issued. */
const madeUpKey = () => 'pet_live_' + randomBytes(32).toString('base64url');
/** A key of the tagged shape whose tag no secret made (it passes once in 2^64). */
const forgedKey = () => madeUpKey() + randomBytes(8).toString('base64url');
/** Made-up keys of both shapes, in turn. */
const eitherMadeUpKey = (i: number) => (i % 2 ? forgedKey() : madeUpKey());

/** Scrapes of /metrics per server: each runs the readiness check, one ping (a transaction) of the store. */
const scrapes = new WeakMap<TestServer, number>();
const scrapesOf = (server: TestServer) => scrapes.get(server) ?? 0;

async function lookups(server: TestServer): Promise<number> {
  scrapes.set(server, scrapesOf(server) + 1);
  const text = (await call(server, 'GET', '/metrics', { key: TOKEN })).text;
  const line = text.split('\n').find((l) => l.startsWith('petstore_keys_looked_up_total '));
  assert.ok(line, 'the lookup metric is served');
  return Number(line.split(' ')[1]);
}

/** Sends `count` requests, `concurrency` at a time, and returns the answers in order. */
async function inBatches(count: number, concurrency: number, send: (i: number) => ReturnType<typeof call>) {
  const answers: Awaited<ReturnType<typeof call>>[] = [];
  for (let first = 0; first < count; first += concurrency) {
    const size = Math.min(concurrency, count - first);
    answers.push(...(await Promise.all(Array.from({ length: size }, (_, i) => send(first + i)))));
  }
  return answers;
}

const statuses = (answers: readonly { status: number }[]) => {
  const counted: Record<number, number> = {};
  for (const a of answers) counted[a.status] = (counted[a.status] ?? 0) + 1;
  return counted;
};

/**
 * Every transaction PostgreSQL counted on the server's database from its creation, read once the
 * server's connections are closed (a backend flushes its statistics when it ends; an idle one may hold
 * them for 10 s) and at least `atLeast` are visible (through a pooler the backends outlive the store).
 */
async function databaseTransactions(server: TestServer, atLeast: number): Promise<number> {
  await server.store.close();
  const name = new URL(server.databaseUrl).pathname.slice(1);
  let total = 0;
  await withPostgres(POSTGRES_URL!, async (admin) => {
    await eventually(async () => {
      await admin.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await admin.query<{ n: string }>(
        'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1',
        [name],
      );
      total = Number(rows[0]!.n);
      return total >= atLeast;
    }, 15_000);
  });
  return total;
}

/** The address's 429: its own limit and headers, nothing of a key's. */
function assertAddressRefusal(res: Awaited<ReturnType<typeof call>>): void {
  errorOf(res, 429, 'rate_limited');
  assert.equal(res.headers.get('x-ratelimit-limit'), '60');
  assert.equal(res.headers.get('x-ratelimit-remaining'), '0');
  assert.equal(res.headers.get('ratelimit-policy'), '"minute";q=60;w=60');
  assert.ok(Number(res.headers.get('retry-after')) >= 1);
}

describe('what authentication costs the store', () => {
  test('rotating made-up keys from one address cost at most its limit in lookups (and the requests in flight); past it, none', async (t) => {
    const server = await startTestServer({ metricsToken: TOKEN });
    t.after(() => server.close());
    const answers = await inBatches(2000, 20, () => call(server, 'GET', '/v1/pets', { key: madeUpKey() }));
    assert.deepEqual(statuses(answers), { 401: 60, 429: 1940 });
    for (const refused of answers.filter((a) => a.status === 429)) assertAddressRefusal(refused);
    const spending = await lookups(server);
    // The 60 the address had room for, those whose look at the address came before the 60th was
    // charged (at most the 19 others of its batch), and one a second once it is spent.
    assert.ok(spending >= 60 && spending <= 60 + 19 + 1, `${spending} lookups`);

    const past = await inBatches(1000, 20, () => call(server, 'GET', '/v1/pets', { key: madeUpKey() }));
    assert.deepEqual(statuses(past), { 429: 1000 });
    for (const refused of past) assertAddressRefusal(refused);
    assert.ok((await lookups(server)) - spending <= 1, 'past the limit, at most the one lookup a second');

    if (ENGINE === 'postgres') {
      const counted = await lookups(server);
      const transactions = await databaseTransactions(server, counted);
      // Every lookup is one transaction, and every scrape one ping; what remains is the setup (migrations, the cursor secret).
      console.log(`# ${counted} key lookups, ${transactions} PostgreSQL transactions for 3,000 requests with made-up keys`);
      assert.ok(
        transactions <= counted + scrapesOf(server) + SETUP_TRANSACTIONS,
        `${transactions} transactions for ${counted} lookups and ${scrapesOf(server)} scrapes`,
      );
    }
  });

  test('a made-up key sent again is looked up once while it is remembered (KEY_CACHE_TTL_MS), concurrent or not', async (t) => {
    const server = await startTestServer({ metricsToken: TOKEN });
    t.after(() => server.close());
    const key = madeUpKey();
    const together = await Promise.all(Array.from({ length: 20 }, () => call(server, 'GET', '/v1/pets', { key })));
    assert.deepEqual(statuses(together), { 401: 20 });
    for (let i = 0; i < 20; i++) errorOf(await call(server, 'GET', '/v1/pets', { key }), 401, 'unauthorized');
    assert.equal(await lookups(server), 1);

    server.clock.advance(KEY_TTL_MS);
    errorOf(await call(server, 'GET', '/v1/pets', { key }), 401, 'unauthorized');
    assert.equal(await lookups(server), 2, 'looked up again once forgotten');
  });

  test('a key of a length no key is issued with is refused without a lookup', async (t) => {
    const server = await startTestServer({ metricsToken: TOKEN });
    t.after(() => server.close());
    const key = await server.key('pro');
    for (const other of ['pet_live_guess', key + 'x', key.slice(0, -1)]) {
      const err = errorOf(await call(server, 'GET', '/v1/pets', { key: other }), 401, 'unauthorized');
      assert.match(err.message, /invalid/i);
    }
    assert.equal(await lookups(server), 0);
  });

  test('100 concurrent requests with a key not looked up yet share one lookup, and again when its entry expires', async (t) => {
    const server = await startTestServer({ metricsToken: TOKEN });
    t.after(() => server.close());
    const key = await server.key('business');
    // A malformed pet id: answered after the guard, without the store, so only authentication reaches it.
    const send = () => call(server, 'GET', '/v1/pets/not-an-id', { key });
    const first = await Promise.all(Array.from({ length: 100 }, send));
    assert.deepEqual(statuses(first), { 400: 100 });
    assert.equal(await lookups(server), 1);

    server.clock.advance(KEY_TTL_MS);
    const again = await Promise.all(Array.from({ length: 100 }, send));
    assert.deepEqual(statuses(again), { 400: 100 });
    assert.equal(await lookups(server), 2);
    assert.equal(Math.min(...again.map((a) => Number(a.headers.get('x-ratelimit-remaining')))), 1000 - 200);

    if (ENGINE === 'postgres') {
      const transactions = await databaseTransactions(server, 2);
      // Per expiry one key lookup and one ban lookup, whatever the concurrency, and a ping per scrape; the rest is the setup.
      console.log(`# ${transactions} PostgreSQL transactions for 200 requests of one key in two bursts`);
      assert.ok(transactions <= 4 + scrapesOf(server) + SETUP_TRANSACTIONS, `${transactions} transactions`);
    }
  });

  test('made-up keys whose tag does not pass cost no lookup, even while their address has room; past it they get its 429', async (t) => {
    const server = await startTestServer({ metricsToken: TOKEN });
    t.after(() => server.close());
    const answers = await inBatches(2000, 20, () => call(server, 'GET', '/v1/pets', { key: forgedKey() }));
    assert.deepEqual(statuses(answers), { 401: 60, 429: 1940 });
    for (const refused of answers.filter((a) => a.status === 401)) {
      assert.equal(errorOf(refused, 401, 'unauthorized').message, 'Invalid API key', 'the message of any unknown key');
    }
    for (const refused of answers.filter((a) => a.status === 429)) assertAddressRefusal(refused);
    // Sent again, one is refused from its tag again, never remembered and never looked up.
    const again = forgedKey();
    for (let i = 0; i < 3; i++) assertAddressRefusal(await call(server, 'GET', '/v1/pets', { key: again }));
    assert.equal(await lookups(server), 0);

    if (ENGINE === 'postgres') {
      // At least the start's own: the migrations, the secret, the untagged keys.
      const transactions = await databaseTransactions(server, 3);
      console.log(`# ${transactions} PostgreSQL transactions for 2,003 requests with forged tags, the setup included`);
      assert.ok(transactions <= scrapesOf(server) + SETUP_TRANSACTIONS, `${transactions} transactions`);
    }
  });

  test('a valid key new to this instance works from an address past its limit, whatever made-up keys took, charged to itself', async (t) => {
    const server = await startTestServer({ metricsToken: TOKEN });
    t.after(() => server.close());
    const established = await server.key('pro');
    assert.equal((await call(server, 'GET', '/v1/pets', { key: established })).status, 200);
    const spent = await inBatches(80, 20, (i) => call(server, 'GET', '/v1/pets', { key: eitherMadeUpKey(i) }));
    assert.deepEqual(statuses(spent), { 401: 60, 429: 20 });
    assert.equal((await call(server, 'GET', '/v1/pets', { key: established })).status, 200, 'a remembered key');

    // Each new key comes right after an untagged made-up key, which takes the address's lookup of this
    // second if it is still free: the new key's tag passes, so it is looked up all the same.
    const before = await lookups(server);
    for (let i = 0; i < 5; i++) {
      assertAddressRefusal(await call(server, 'GET', '/v1/pets', { key: madeUpKey() }));
      assertAddressRefusal(await call(server, 'GET', '/v1/pets', { key: forgedKey() }));
      const fresh = await call(server, 'GET', '/v1/pets', { key: await server.key('free') });
      assert.equal(fresh.status, 200, JSON.stringify(fresh.json));
      assert.equal(fresh.headers.get('ratelimit-policy'), '"minute";q=60;w=60, "day";q=1000;w=86400', "the key's windows");
      assert.equal(fresh.headers.get('x-ratelimit-remaining'), '59');
    }
    assert.ok((await lookups(server)) - before <= 5 + 1, "the new keys' lookups and the second's one of a made-up key");

    // Once every entry expired, a key found before is looked up again from the spent address.
    server.clock.advance(KEY_TTL_MS);
    assertAddressRefusal(await call(server, 'GET', '/v1/pets', { key: madeUpKey() }));
    const again = await call(server, 'GET', '/v1/pets', { key: established });
    assert.equal(again.status, 200);
    assert.equal(again.headers.get('x-ratelimit-limit'), '300');
    assert.equal(again.headers.get('x-ratelimit-remaining'), '297');
  });

  test('an untagged key (issued before tags) stored before the instance started works from an address past its limit', async (t) => {
    const first = await startTestServer({ metricsToken: TOKEN });
    t.after(() => first.close());
    const untagged = await createUntaggedKey(first.store, 'production', 'pro');
    // An instance started after the key was stored knows it exists, though it never saw it.
    const server = await startTestServer({ metricsToken: TOKEN }, { databaseOf: first });
    t.after(() => server.close());
    const spent = await inBatches(80, 20, (i) => call(server, 'GET', '/v1/pets', { key: eitherMadeUpKey(i) }));
    assert.deepEqual(statuses(spent), { 401: 60, 429: 20 });
    assertAddressRefusal(await call(server, 'GET', '/v1/pets', { key: madeUpKey() }));
    const res = await call(server, 'GET', '/v1/pets', { key: untagged });
    assert.equal(res.status, 200, JSON.stringify(res.json));
    assert.equal(res.headers.get('x-ratelimit-limit'), '300');
    assert.equal(res.headers.get('x-ratelimit-remaining'), '299');
  });

  test("an untagged key stored after the instance started keeps the old path: past its address's limit, looked up once a second", async (t) => {
    // Only a release before tags stores one now (during a rolling upgrade): docs/rate-limits.md.
    const server = await startTestServer({ metricsToken: TOKEN });
    t.after(() => server.close());
    const spent = await inBatches(80, 20, (i) => call(server, 'GET', '/v1/pets', { key: eitherMadeUpKey(i) }));
    assert.deepEqual(statuses(spent), { 401: 60, 429: 20 });

    // A made-up key took the address's lookup of this second: the untagged key waits for the next one.
    assertAddressRefusal(await call(server, 'GET', '/v1/pets', { key: madeUpKey() }));
    const late = await createUntaggedKey(server.store);
    assertAddressRefusal(await call(server, 'GET', '/v1/pets', { key: late }));
    server.clock.advance(1000);
    const first = await call(server, 'GET', '/v1/pets', { key: late });
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('x-ratelimit-remaining'), '59');

    // Found, it is known to exist for the hour: once its entry expired, it is looked up whatever took the second.
    server.clock.advance(KEY_TTL_MS);
    assertAddressRefusal(await call(server, 'GET', '/v1/pets', { key: madeUpKey() }));
    const before = await lookups(server);
    assertAddressRefusal(await call(server, 'GET', '/v1/pets', { key: madeUpKey() }));
    assert.equal(await lookups(server), before, 'the second made-up key is refused without a lookup');
    assert.equal((await call(server, 'GET', '/v1/pets', { key: late })).status, 200);
    assert.equal(await lookups(server), before + 1);
  });
});
