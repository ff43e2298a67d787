/**
 * Temporary bans over a real SQLite store, with the clock in the test's hand (src/limits/bans.ts): the
 * grace and the threshold, what is cached, and how long a ban lasts when a wall clock steps, on the
 * instance that placed it and on one that reads it from the store (another instance, or after a restart).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createKey, formatKeyTable, listKeys } from '../../src/cli/keys.ts';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import { BanNotStoredError, KeyBans, type BanPolicy } from '../../src/limits/bans.ts';
import { MemoryRateLimiter } from '../../src/limits/memory.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import type { BanStore } from '../../src/storage/store.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { limitsOf, memoryLimiter, NOON } from '../support/limiter-fixtures.ts';
import { atEnd, tempDir, type Owner } from '../support/temp.ts';

describe('temporary bans', () => {
  const POLICY: BanPolicy = { threshold: 3, graceMs: 1000, durationMs: 900_000, cacheTtlMs: 2000 };
  async function banning(t: Owner, policy = POLICY) {
    const store = openSqliteStore({ path: join(tempDir(t), 'petstore.db'), synchronous: 'normal' });
    atEnd(t, () => store.close());
    const { clock, limiter } = memoryLimiter(NOON + 10_000);
    const keys = await Promise.all([1, 2].map(() => createKey(store, 'production', { plan: 'free' })));
    return { store, clock, limiter, bans: new KeyBans(store, limiter, clock, policy), ids: keys.map((k) => k.record.id) };
  }
  const limits = limitsOf(1, 1_000);
  /** A refused decision of the key, at the limiter's clock. */
  const refusal = (limiter: MemoryRateLimiter, id: string) => {
    limiter.consumeNow(`key:${id}`, limits);
    const decision = limiter.consumeNow(`key:${id}`, limits);
    assert.equal(decision.allowed, false);
    return decision;
  };

  test('refusals within the grace count for nothing; the threshold-th counted one bans, to the whole second', async (t) => {
    const { clock, limiter, bans, store, ids } = await banning(t);
    const [id] = ids as [string];
    for (let i = 0; i < 10; i++) assert.equal(await bans.recordRefusal(id, refusal(limiter, id)), undefined);
    clock.ms += 1000;
    clock.ms += 250;
    assert.equal(await bans.recordRefusal(id, refusal(limiter, id)), undefined);
    assert.equal(await bans.recordRefusal(id, refusal(limiter, id)), undefined);
    const end = await bans.recordRefusal(id, refusal(limiter, id));
    assert.equal(end, Math.ceil((clock.ms + 900_000) / 1000) * 1000);
    assert.equal(await store.banEndOf(id, clock.ms), end);
    assert.equal(await bans.bannedUntil(id, clock.ms), end);
    assert.equal(await bans.recordRefusal(id, refusal(limiter, id)), undefined, 'one ban per window');
  });

  test('BAN_GRACE_MS=0 counts every refusal, the first of its window too, though it is recorded a moment after its decision', async (t) => {
    const { clock, limiter, bans, ids } = await banning(t, { ...POLICY, graceMs: 0, threshold: 1 });
    const [id] = ids as [string];
    const first = refusal(limiter, id);
    // Time passes between the limiter's decision and its recording (the answer's path, a round trip to Redis).
    clock.ms += 1;
    assert.equal(await bans.recordRefusal(id, first), Math.ceil((first.nowMs + 900_000) / 1000) * 1000, 'the first refusal bans');
  });

  test("keys do not share refusals: one key's counted refusals ban only that key", async (t) => {
    const { clock, limiter, bans, ids } = await banning(t);
    const [a, b] = ids as [string, string];
    await bans.recordRefusal(a, refusal(limiter, a));
    await bans.recordRefusal(b, refusal(limiter, b));
    clock.ms += 1000;
    for (let i = 0; i < 2; i++) await bans.recordRefusal(a, refusal(limiter, a));
    for (let i = 0; i < 2; i++) await bans.recordRefusal(b, refusal(limiter, b));
    assert.ok((await bans.recordRefusal(a, refusal(limiter, a))) !== undefined, 'a is banned at its third');
    assert.equal(await bans.bannedUntil(b, clock.ms), undefined);
  });

  test('each window has its own first refusal: the next window starts a new grace', async (t) => {
    const { clock, limiter, bans, ids } = await banning(t);
    const [id] = ids as [string];
    for (let window = 0; window < 3; window++) {
      clock.ms = NOON + window * MINUTE_MS + 200;
      for (let i = 0; i < 10; i++) await bans.recordRefusal(id, refusal(limiter, id));
      clock.ms += 900;
      for (let i = 0; i < 10; i++) assert.equal(await bans.recordRefusal(id, refusal(limiter, id)), undefined, `window ${window}`);
    }
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined);
  });

  test('a ban ends at its exact moment', async (t) => {
    const { clock, bans, store, ids } = await banning(t);
    const [id] = ids as [string];
    const end = clock.ms + 5000;
    await store.banKey(id, end);
    clock.ms += 4999;
    assert.equal(await bans.bannedUntil(id, clock.ms), end);
    clock.ms += 1;
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined);
  });

  test("each window's first refusal is its own: a day refused after a refused minute starts its own grace", async (t) => {
    const { clock, limiter, bans, ids } = await banning(t, { ...POLICY, threshold: 1 });
    const [id] = ids as [string];
    const minuteFirst = refusal(limiter, id);
    assert.equal(minuteFirst.windows[0]!.remaining, 0);
    assert.equal(await bans.recordRefusal(id, minuteFirst), undefined);
    // A plan change lowers the day below what is spent: 1.5 s later, the day refuses for the first time.
    clock.ms += 1500;
    const dayFirst = limiter.consumeNow(`key:${id}`, limitsOf(1, 1));
    assert.equal(dayFirst.allowed, false);
    assert.equal(await bans.recordRefusal(id, dayFirst), undefined, 'the first refusal of the day counts for nothing');
  });

  test("each key's grace runs from its own first refusal, not from another key's", async (t) => {
    const { clock, limiter, bans, ids } = await banning(t);
    const [a, b] = ids as [string, string];
    assert.equal(await bans.recordRefusal(a, refusal(limiter, a)), undefined);
    clock.ms += 5000;
    for (let i = 0; i < 10; i++) assert.equal(await bans.recordRefusal(b, refusal(limiter, b)), undefined, "within b's own grace");
  });

  test('requests that ask at once about a key the instance does not hold share one read of the store; the next read comes after the TTL', async (t) => {
    const { clock, limiter, store, ids } = await banning(t);
    const [id] = ids as [string];
    let reads = 0;
    const counting: BanStore = {
      banKey: (keyId, untilMs) => store.banKey(keyId, untilMs),
      banEndOf: (keyId, nowMs) => (reads++, store.banEndOf(keyId, nowMs)),
      listBans: (nowMs) => store.listBans(nowMs),
      liftBan: (keyId, nowMs) => store.liftBan(keyId, nowMs),
    };
    const bans = new KeyBans(counting, limiter, clock, POLICY);
    await Promise.all([1, 2, 3].map(() => bans.bannedUntil(id, clock.ms)));
    assert.equal(reads, 1);
    clock.ms += POLICY.cacheTtlMs;
    await Promise.all([1, 2].map(() => bans.bannedUntil(id, clock.ms)));
    assert.equal(reads, 2, 'read again once the TTL has passed');
  });

  test("a ban the store could not take holds here to the whole second, whatever the store says, until its exact end; then the store's word counts", async (t) => {
    const policy = { ...POLICY, threshold: 1, graceMs: 0 };
    const { clock, limiter, store, ids } = await banning(t, policy);
    const [id] = ids as [string];
    const fault = new Error('disk I/O error');
    let failing = true;
    const flaky: BanStore = {
      banKey: (keyId, untilMs) => (failing ? Promise.reject(fault) : store.banKey(keyId, untilMs)),
      banEndOf: (keyId, nowMs) => store.banEndOf(keyId, nowMs),
      listBans: (nowMs) => store.listBans(nowMs),
      liftBan: (keyId, nowMs) => store.liftBan(keyId, nowMs),
    };
    const bans = new KeyBans(flaky, limiter, clock, policy);
    clock.ms += 250; // not on a whole second
    const end = Math.ceil((clock.ms + policy.durationMs) / 1000) * 1000;
    await assert.rejects(bans.recordRefusal(id, refusal(limiter, id)), (err: unknown) => {
      assert.ok(err instanceof BanNotStoredError);
      assert.equal(err.message, 'the ban could not be stored');
      assert.equal(err.cause, fault);
      assert.equal(err.bannedUntilMs, end);
      return true;
    });
    assert.equal(await bans.bannedUntil(id, clock.ms), end);
    clock.ms += policy.cacheTtlMs;
    assert.equal(await store.banEndOf(id, 0), undefined, 'the store has none');
    assert.equal(await bans.bannedUntil(id, clock.ms), end, 'held here all the same');
    failing = false;
    await store.banKey(id, end + 60_000); // another instance's ban, ending later
    clock.ms = end - policy.cacheTtlMs; // read again: this instance's own still holds; cached until its very end
    assert.equal(await bans.bannedUntil(id, clock.ms), end, 'this instance holds its own until its end');
    clock.ms = end;
    assert.equal(await bans.bannedUntil(id, clock.ms), end + 60_000, "at its end the store's ban is read");
  });

  test('a ban state is kept for the cache TTL, then read again', async (t) => {
    const { clock, bans, store, ids } = await banning(t);
    const [id] = ids as [string];
    assert.equal(bans.knownBanEnd(id, clock.ms), undefined, 'unknown before the first lookup');
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined);
    assert.equal(bans.knownBanEnd(id, clock.ms), 0, 'known: not banned');
    await store.banKey(id, clock.ms + 60_000);
    clock.ms += 1999;
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined, 'the cached answer within the TTL');
    clock.ms += 1;
    assert.equal(await bans.bannedUntil(id, clock.ms), NOON + 10_000 + 60_000);
    await store.liftBan(id, clock.ms);
    clock.ms += 2000;
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined);
  });
});

describe('a ban and a wall clock that steps', () => {
  const POLICY: BanPolicy = { threshold: 1, graceMs: 0, durationMs: 900_000, cacheTtlMs: 2000 };
  const limits = limitsOf(1, 1_000);

  async function instance(t: Owner) {
    const store = openSqliteStore({ path: join(tempDir(t), 'petstore.db'), synchronous: 'normal' });
    atEnd(t, () => store.close());
    const { record } = await createKey(store, 'production', { plan: 'free' });
    return { store, id: record.id, ...instanceOn(store) };
  }
  /** An instance over the store, started now (a restart, or another instance): its own clock and memory. */
  function instanceOn(store: ReturnType<typeof openSqliteStore>, startMs = NOON + 10_000) {
    const { clock, limiter } = memoryLimiter(startMs);
    return { clock, limiter, bans: new KeyBans(store, limiter, clock, POLICY) };
  }
  /** Real time passes past the ban cache, so the next lookup reads the store again. */
  const pastCache = (clock: FakeClock) => clock.advance(POLICY.cacheTtlMs);

  test('on the instance that placed it, a ban lasts its length of real time, and is not restarted, whichever way the clock steps', async (t) => {
    const { clock, limiter, bans, id } = await instance(t);
    limiter.consumeNow(`key:${id}`, limits);
    const placedAt = clock.ms; // elapsed 0
    const end = await bans.recordRefusal(id, limiter.consumeNow(`key:${id}`, limits));
    assert.ok(end !== undefined);
    const length = end - placedAt;
    for (const stepMs of [DAY_MS, -2 * DAY_MS, DAY_MS + 3_600_000]) {
      clock.step(stepMs);
      pastCache(clock);
      const until = await bans.bannedUntil(id, clock.ms);
      assert.ok(until !== undefined, `lifted by a step of ${stepMs} ms`);
      assert.equal(until - clock.ms, length - clock.elapsed(), `the real time left, after a step of ${stepMs} ms`);
    }
    clock.advance(length - clock.elapsed() - 1);
    assert.ok((await bans.bannedUntil(id, clock.ms)) !== undefined, 'in force until its real end');
    clock.advance(1);
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined, 'over at its real end');
    pastCache(clock);
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined, 'over when read again');
    // Served out, then the clock is stepped back a day: its stored end is ahead again, but it is over.
    clock.step(-DAY_MS);
    pastCache(clock);
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined, 'restarted by a clock stepped back');
    assert.equal(bans.knownBanEnd(id, clock.ms), 0);
  });

  test('a stored end further than one ban length away is read as ending one length after it was first read', async (t) => {
    const { store, id } = await instance(t);
    // Placed by an instance whose clock was a day ahead; read after a restart on the true clock.
    await store.banKey(id, NOON + 10_000 + DAY_MS + POLICY.durationMs);
    const { clock, bans } = instanceOn(store);
    const firstReadAt = clock.ms;
    const until = await bans.bannedUntil(id, clock.ms);
    assert.equal(until, firstReadAt + POLICY.durationMs, 'one ban length from the first read, not a day');
    assert.equal(bans.knownBanEnd(id, clock.ms), until, 'the answer without a lookup agrees');
    for (let i = 0; i < 3; i++) {
      pastCache(clock);
      assert.equal(await bans.bannedUntil(id, clock.ms), until, 'read again, it keeps the end it was first given');
    }
    clock.step(-3_600_000);
    pastCache(clock);
    assert.equal(await bans.bannedUntil(id, clock.ms), until - 3_600_000, 'a clock stepped back does not lengthen it');
    clock.step(3_600_000);
    clock.ms = until - 1;
    assert.ok((await bans.bannedUntil(id, clock.ms)) !== undefined);
    clock.ms = until;
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined, 'over one length after its first read');
    clock.advance(3_600_000);
    assert.equal(await bans.bannedUntil(id, clock.ms), undefined, 'and stays over, though its stored end is still ahead');
  });

  test('a stored end within one ban length is believed as it is; a millisecond further is not', async (t) => {
    const { store, id } = await instance(t);
    const { clock, bans } = instanceOn(store, NOON + 10_250);
    await store.banKey(id, clock.ms + POLICY.durationMs);
    assert.equal(await bans.bannedUntil(id, clock.ms), clock.ms + POLICY.durationMs);
    pastCache(clock);
    await store.banKey(id, clock.ms + POLICY.durationMs + 1);
    assert.equal(await bans.bannedUntil(id, clock.ms), clock.ms + POLICY.durationMs);
  });
});

describe('keys list and a ban whose stored end is too far', () => {
  test('an end further than one ban length from now is marked, never shown as when the key is banned until', async (t) => {
    const store = openSqliteStore({ path: join(tempDir(t), 'petstore.db'), synchronous: 'normal' });
    atEnd(t, () => store.close());
    const [far, near] = await Promise.all([1, 2].map(() => createKey(store, 'production', { plan: 'free' })));
    const nowMs = Date.now();
    const durationMs = 900_000;
    await store.banKey(far!.record.id, nowMs + DAY_MS + durationMs);
    await store.banKey(near!.record.id, nowMs + durationMs);
    const rows = await listKeys(store, nowMs, durationMs);
    const row = (id: string) => rows.find((r) => r.id === id)!;
    assert.deepEqual([row(far!.record.id).banEndTooFar, row(near!.record.id).banEndTooFar], [true, false]);
    const line = (text: string, id: string) => text.split('\n').find((l) => l.startsWith(id))!;
    const table = formatKeyTable(rows, nowMs);
    assert.match(line(table, far!.record.id), /\sban end too far$/);
    assert.match(line(table, near!.record.id), /\sbanned$/);
    const wide = formatKeyTable(rows, nowMs, { wide: true });
    assert.match(
      line(wide, far!.record.id),
      /ban stored until \S+, too far: each server ends it within one ban length of first reading it/,
    );
    assert.doesNotMatch(line(wide, far!.record.id), /banned until/);
    assert.match(line(wide, near!.record.id), /banned until /);
  });
});
