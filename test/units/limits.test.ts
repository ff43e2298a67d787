/**
 * The limiter's rules one by one, with the clock in the test's hand: temporary bans over a real SQLite
 * store, and the blocks of quota busy keys take from Redis (the in-process limiter's are in
 * memory-limiter.test.ts). Behaviour that the HTTP suites reach only in part: grace, thresholds, ban
 * ends, what a retired block gives.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createKey } from '../../src/cli/keys.ts';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import { KeyBans, type BanPolicy } from '../../src/limits/bans.ts';
import { nearestExhaustion, type WindowLimit } from '../../src/limits/limiter.ts';
import { MemoryRateLimiter } from '../../src/limits/memory.ts';
import { QuotaBlocks, type BlockWindows } from '../../src/limits/quota-blocks.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { atEnd, tempDir, type Owner } from '../support/temp.ts';

/** 12:00:00 UTC on a day: a minute and a day start here. */
const NOON = Date.UTC(2026, 10, 22, 12, 0, 0);
const limitsOf = (perMinute: number, perDay: number): WindowLimit[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];

function memoryLimiter(startMs = NOON) {
  const clock = new FakeClock(startMs);
  return { clock, limiter: new MemoryRateLimiter({ clock }) };
}

describe('the window a decision is reported by', () => {
  const state = (name: string, windowMs: number, remaining: number) => ({ name, limit: 10, windowMs, remaining, resetAtMs: 0 });
  test('the lowest remaining; a tie goes to the longer window, in whatever order the windows come', () => {
    assert.equal(nearestExhaustion([state('minute', MINUTE_MS, 3), state('day', DAY_MS, 2)]).name, 'day');
    assert.equal(nearestExhaustion([state('day', DAY_MS, 3), state('minute', MINUTE_MS, 2)]).name, 'minute');
    assert.equal(nearestExhaustion([state('minute', MINUTE_MS, 2), state('day', DAY_MS, 2)]).name, 'day');
    assert.equal(nearestExhaustion([state('day', DAY_MS, 2), state('minute', MINUTE_MS, 2)]).name, 'day');
  });
});

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

describe('blocks of quota', () => {
  const STARTS = [NOON, Date.UTC(2026, 10, 22)];
  const windowsOf = (countsAfter: number[]): BlockWindows => ({
    names: ['minute', 'day'],
    starts: STARTS,
    limits: [2_000_000, 100_000_000],
    countsAfter,
  });
  function blocks(maxSize = 100) {
    const handed: [string[], number][] = [];
    const quota = new QuotaBlocks({ maxSize, lifetimeMs: 1000, onUnspent: (subject, w, n) => handed.push([[subject, ...w.names], n]) });
    return { quota, handed };
  }

  test('no block for limits below a thousand times the largest; a thousandth of the smallest otherwise', () => {
    const { quota } = blocks();
    assert.equal(quota.capFor([1_000, 100_000]), 1);
    assert.equal(quota.capFor([5_000, 1_000_000]), 5);
    assert.equal(quota.capFor([2_000_000, 100_000_000]), 100);
    assert.equal(blocks(1).quota.capFor([2_000_000, 100_000_000]), 1);
  });

  test('a block is spent one request at a time, each knowing what is left, and the next doubles when it is used up in time', () => {
    const { quota, handed } = blocks();
    assert.equal(quota.sizeFor('k', 100), 1, 'a first request is decided alone');
    assert.deepEqual(quota.granted('k', 4, windowsOf([10, 20]), NOON), [2_000_000 - 7, 100_000_000 - 17]);
    assert.deepEqual(quota.spend('k', STARTS, NOON + 1), [2_000_000 - 8, 100_000_000 - 18]);
    assert.ok(quota.spend('k', STARTS, NOON + 2));
    assert.ok(quota.spend('k', STARTS, NOON + 3));
    assert.equal(quota.spend('k', STARTS, NOON + 4), undefined, 'spent');
    assert.equal(quota.sizeFor('k', 100), 8);
    assert.equal(quota.sizeFor('k', 5), 5, 'never above the cap');
    assert.deepEqual(handed, []);
  });

  test('an expired or replaced block hands back what it left, and the next one is sized to what it served', () => {
    const { quota, handed } = blocks();
    quota.granted('k', 10, windowsOf([10, 10]), NOON);
    quota.spend('k', STARTS, NOON + 1);
    assert.equal(quota.spend('k', STARTS, NOON + 1000), undefined, 'expired at its lifetime');
    assert.deepEqual(handed, [[['k', 'minute', 'day'], 8]]);
    assert.equal(quota.sizeFor('k', 100), 2);
    quota.granted('k', 4, windowsOf([20, 20]), NOON + 1000);
    quota.granted('k', 4, windowsOf([24, 24]), NOON + 1001);
    assert.deepEqual(handed[1], [['k', 'minute', 'day'], 3]);
  });

  test('a block retired at a window boundary hands its rest back (each counter decides if it is still in that window)', () => {
    const { quota, handed } = blocks();
    quota.granted('k', 10, windowsOf([10, 10]), NOON + MINUTE_MS - 10);
    assert.equal(quota.spend('k', [NOON + MINUTE_MS, STARTS[1]!], NOON + MINUTE_MS), undefined);
    assert.deepEqual(handed, [[['k', 'minute', 'day'], 9]]);
  });

  test('sweep hands back expired blocks and forgets idle subjects; releaseAll hands back the rest and forgets all', () => {
    const { quota, handed } = blocks();
    quota.granted('idle', 5, windowsOf([5, 5]), NOON);
    quota.granted('busy', 7, windowsOf([7, 7]), NOON + 1500);
    quota.sweep(NOON + 1000);
    assert.deepEqual(handed, [[['idle', 'minute', 'day'], 4]], 'only the expired block');
    // A subject whose blocks grew, then went idle for two lifetimes, is forgotten: it starts at 1 again.
    quota.granted('grown', 2, windowsOf([2, 2]), NOON + 1000);
    quota.spend('grown', STARTS, NOON + 1001);
    assert.equal(quota.spend('grown', STARTS, NOON + 1002), undefined);
    assert.equal(quota.sizeFor('grown', 100), 4);
    quota.sweep(NOON + 1002 + 1999);
    assert.equal(quota.sizeFor('grown', 100), 4, 'not yet two lifetimes idle');
    quota.sweep(NOON + 1002 + 2000);
    assert.equal(quota.sizeFor('grown', 100), 1);
    assert.equal(handed.length, 2, 'the busy block expired and was handed back; the spent one gave nothing');
    assert.deepEqual(handed[1], [['busy', 'minute', 'day'], 6]);
    quota.granted('kept', 2, windowsOf([2, 2]), NOON + 5000);
    quota.spend('kept', STARTS, NOON + 5001);
    quota.spend('kept', STARTS, NOON + 5002);
    quota.granted('open', 3, windowsOf([3, 3]), NOON + 5000);
    // A block whose every request was spent, not yet replaced when it expires, has nothing to give.
    quota.granted('used', 2, windowsOf([2, 2]), NOON + 3000);
    quota.spend('used', STARTS, NOON + 3001);
    quota.sweep(NOON + 4000);
    assert.equal(handed.length, 2);
    quota.releaseAll();
    assert.deepEqual(handed[2], [['open', 'minute', 'day'], 2], 'the open block, and nothing of the spent one');
    assert.equal(handed.length, 3);
    assert.equal(quota.sizeFor('kept', 100), 1, 'forgotten');
    assert.equal(quota.spend('open', STARTS, NOON + 5003), undefined);
  });
});
