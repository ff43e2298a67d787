/**
 * The limiter's rules one by one, with the clock in the test's hand: the in-process limiter (the
 * embedded default, and the Redis limiter's fallback) and the blocks of quota busy keys take from
 * Redis (temporary bans: bans.test.ts). Behaviour that the HTTP suites reach only in part:
 * exact window edges, what the sweep keeps, marks per subject and period, what a retired block gives.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import { nearestExhaustion, type WindowLimit } from '../../src/limits/limiter.ts';
import { MemoryRateLimiter } from '../../src/limits/memory.ts';
import { QuotaBlocks, type BlockWindows } from '../../src/limits/quota-blocks.ts';
import { FakeClock } from '../support/fake-clock.ts';

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

const admittedOf = (limiter: MemoryRateLimiter, subject: string, limits: WindowLimit[], n: number) => {
  let admitted = 0;
  for (let i = 0; i < n; i++) if (limiter.consumeNow(subject, limits).allowed) admitted++;
  return admitted;
};

describe('the in-process limiter', () => {
  test('admits up to the limit, counts only what it admits, and says when each window resets', () => {
    const { limiter } = memoryLimiter(NOON + 20_000);
    const limits = limitsOf(3, 10);
    const first = limiter.consumeNow('key:a', limits);
    assert.equal(first.nowMs, NOON + 20_000);
    assert.deepEqual(
      first.windows.map((w) => [w.name, w.remaining, w.resetAtMs]),
      [
        ['minute', 2, NOON + MINUTE_MS],
        ['day', 9, Date.UTC(2026, 10, 23)],
      ],
    );
    assert.equal(admittedOf(limiter, 'key:a', limits, 5), 2);
    const refused = limiter.consumeNow('key:a', limits);
    assert.equal(refused.allowed, false);
    assert.deepEqual(
      refused.windows.map((w) => w.remaining),
      [0, 7],
      'refusals use nothing of the day',
    );
  });

  test('a window ends at its exact edge, and the other window goes on counting', () => {
    const { clock, limiter } = memoryLimiter();
    const limits = limitsOf(2, 5);
    assert.equal(admittedOf(limiter, 'key:a', limits, 3), 2);
    clock.ms = NOON + MINUTE_MS - 1;
    assert.equal(limiter.consumeNow('key:a', limits).allowed, false, 'the last millisecond of the minute');
    clock.ms = NOON + MINUTE_MS;
    assert.equal(admittedOf(limiter, 'key:a', limits, 3), 2);
    clock.ms = NOON + 2 * MINUTE_MS;
    assert.equal(admittedOf(limiter, 'key:a', limits, 3), 1, 'the day has one left of five');
    assert.deepEqual(
      limiter.consumeNow('key:a', limits).windows.map((w) => w.remaining),
      [1, 0],
    );
  });

  test('subjects are counted apart, and a look (peek) counts nothing', async () => {
    const { limiter } = memoryLimiter();
    const limits = limitsOf(2, 100);
    assert.equal(admittedOf(limiter, 'key:a', limits, 3), 2);
    assert.equal(admittedOf(limiter, 'key:b', limits, 3), 2);
    const look = await limiter.peek('key:c', limits);
    assert.equal(look.allowed, true);
    assert.equal(look.windows[0]!.remaining, 2);
    assert.equal(admittedOf(limiter, 'key:c', limits, 3), 2);
    assert.equal((await limiter.peek('key:c', limits)).allowed, false);
    assert.equal((await limiter.consume('key:c', limits)).allowed, false);
  });

  test('limits of another shape (a plan change) start the subject afresh; the same shape keeps its counts', () => {
    const { limiter } = memoryLimiter();
    assert.equal(admittedOf(limiter, 'key:a', limitsOf(2, 100), 3), 2);
    assert.equal(admittedOf(limiter, 'key:a', limitsOf(2, 100), 1), 0);
    assert.equal(admittedOf(limiter, 'key:a', [{ name: 'minute', limit: 2, windowMs: MINUTE_MS }], 3), 2);
    assert.equal(admittedOf(limiter, 'key:a', [{ name: 'hour', limit: 2, windowMs: 3_600_000 }], 3), 2);
  });

  test('the sweep, once a minute, forgets subjects and marks whose every window has ended, and nothing live', async () => {
    const { clock, limiter } = memoryLimiter();
    const limits = limitsOf(2, 3);
    const dayOnly = [{ name: 'day', limit: 2, windowMs: DAY_MS }];
    admittedOf(limiter, 'key:day', limits, 2);
    admittedOf(limiter, 'key:day-only', dayOnly, 3);
    admittedOf(limiter, 'addr:x', [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }], 1);
    await limiter.firstMark('m:minute', NOON + MINUTE_MS);
    assert.equal(limiter.size, 4);
    // The minute has ended, but no sweep has run since: what it held is no longer current all the same.
    clock.ms = NOON + MINUTE_MS;
    assert.deepEqual([...limiter.current()].map(([subject]) => subject).sort(), ['key:day', 'key:day-only']);
    clock.ms = NOON + MINUTE_MS - 1;
    assert.equal(admittedOf(limiter, 'key:other', limits, 1), 1);
    assert.equal(limiter.size, 5, 'no sweep before a minute has passed');
    clock.ms = NOON + MINUTE_MS;
    assert.equal(admittedOf(limiter, 'key:other', limits, 1), 1);
    assert.equal(limiter.size, 3, 'the ended minute subject and mark are gone; the days stay');
    assert.equal(admittedOf(limiter, 'key:day-only', dayOnly, 1), 0, 'a live day keeps its count through the sweep');
    assert.equal(admittedOf(limiter, 'key:day', limits, 3), 1, 'the day still holds the two spent');
    await limiter.firstMark('m:day', Date.UTC(2026, 10, 23));
    admittedOf(limiter, 'addr:y', [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }], 1);
    assert.equal(limiter.size, 5);
    clock.ms = NOON + 2 * MINUTE_MS;
    limiter.observe('key:seen', limits, [NOON + 2 * MINUTE_MS, Date.UTC(2026, 10, 22)], [1, 1], NOON + 2 * MINUTE_MS);
    assert.equal(limiter.size, 5, 'observe sweeps too (the ended addr:y goes), and keeps what it was told');
    assert.equal(await limiter.firstMark('m:day', Date.UTC(2026, 10, 23)), NOON + MINUTE_MS, 'a live mark outlives the sweep');
    await limiter.close();
    assert.equal(limiter.size, 0, 'close forgets counters and marks');
  });

  test("unanchored (a Redis fallback that never heard Redis's clock): a window lasts a window length after its last admission, whatever the wall clock", () => {
    const clock = new FakeClock(NOON + 50_000);
    const limiter = new MemoryRateLimiter({ clock, unanchored: () => true });
    const limits = [{ name: 'minute', limit: 3, windowMs: MINUTE_MS }];
    assert.equal(admittedOf(limiter, 'key:u', limits, 2), 2);
    clock.advance(9_000); // 12:00:59
    assert.equal(admittedOf(limiter, 'key:u', limits, 5), 1);
    clock.advance(2_000); // 12:01:01 by this clock, 2 s after the last admission
    const refused = limiter.consumeNow('key:u', limits);
    assert.equal(refused.allowed, false, 'its own minute turned, but the true clock may still be in the same one');
    assert.equal(Math.ceil((refused.windows[0]!.resetAtMs - clock.now()) / 1000), 58, 'the reset told is the real one');
    clock.advance(58_000);
    assert.equal(admittedOf(limiter, 'key:u', limits, 5), 3, 'a window length after its last admission');
  });

  test('observe takes counts from elsewhere as its own; current lists them', () => {
    const { limiter } = memoryLimiter(NOON + 5_000);
    const limits = limitsOf(60, 1_000);
    limiter.observe('key:a', limits, [NOON, Date.UTC(2026, 10, 22)], [58, 990], NOON + 5_000);
    assert.equal(admittedOf(limiter, 'key:a', limits, 5), 2);
    const [only] = [...limiter.current()];
    const [subject, counters] = only!;
    assert.equal(subject, 'key:a');
    assert.deepEqual(
      counters.map((c) => [c.name, c.count, c.end]),
      [
        ['minute', 60, NOON + MINUTE_MS],
        ['day', 992, Date.UTC(2026, 10, 23)],
      ],
    );
  });

  test('observe keeps the higher count within a window: a reply that arrives late takes nothing back', () => {
    const { clock, limiter } = memoryLimiter(NOON + 5_000);
    const limits = limitsOf(10, 1_000);
    const starts = [NOON, Date.UTC(2026, 10, 22)];
    limiter.observe('key:a', limits, starts, [5, 5], NOON + 5_000);
    assert.equal(admittedOf(limiter, 'key:a', limits, 3), 3);
    limiter.observe('key:a', limits, starts, [6, 6], NOON + 5_000);
    assert.equal(admittedOf(limiter, 'key:a', limits, 5), 2, 'the 8 counted here stand against the late 6');
    clock.ms = NOON + MINUTE_MS;
    limiter.observe('key:a', limits, [NOON + MINUTE_MS, starts[1]!], [1, 9], NOON + MINUTE_MS);
    assert.deepEqual(
      limiter.consumeNow('key:a', limits).windows.map((w) => w.remaining),
      [8, 989],
      'a new minute starts from what it was told; the day keeps its higher 10',
    );
  });

  test('a mark is the first of its period until the period ends, per subject', async () => {
    const { clock, limiter } = memoryLimiter();
    assert.equal(await limiter.firstMark('m:a', NOON + MINUTE_MS), NOON);
    clock.ms = NOON + 30_000;
    assert.equal(await limiter.firstMark('m:a', NOON + MINUTE_MS), NOON);
    assert.equal(await limiter.firstMark('m:b', NOON + MINUTE_MS), NOON + 30_000, 'another subject has its own');
    clock.ms = NOON + MINUTE_MS;
    assert.equal(await limiter.firstMark('m:a', NOON + 2 * MINUTE_MS), NOON + MINUTE_MS, 'a new period');
    clock.ms = NOON + 10 * MINUTE_MS; // a sweep forgets ended marks; a new one starts again
    admittedOf(limiter, 'key:x', limitsOf(1, 1), 1);
    assert.equal(await limiter.firstMark('m:b', NOON + 11 * MINUTE_MS), NOON + 10 * MINUTE_MS);
  });

  test('close forgets everything', async () => {
    const { limiter } = memoryLimiter();
    admittedOf(limiter, 'key:a', limitsOf(1, 1), 1);
    await limiter.close();
    assert.equal(admittedOf(limiter, 'key:a', limitsOf(1, 1), 1), 1);
  });
});

describe('the window a decision is reported by', () => {
  const state = (name: string, windowMs: number, remaining: number) => ({ name, limit: 10, windowMs, remaining, resetAtMs: 0 });
  test('the lowest remaining; a tie goes to the longer window, in whatever order the windows come', () => {
    assert.equal(nearestExhaustion([state('minute', MINUTE_MS, 3), state('day', DAY_MS, 2)]).name, 'day');
    assert.equal(nearestExhaustion([state('day', DAY_MS, 3), state('minute', MINUTE_MS, 2)]).name, 'minute');
    assert.equal(nearestExhaustion([state('minute', MINUTE_MS, 2), state('day', DAY_MS, 2)]).name, 'day');
    assert.equal(nearestExhaustion([state('day', DAY_MS, 2), state('minute', MINUTE_MS, 2)]).name, 'day');
  });
});

describe('blocks of quota', () => {
  const STARTS = [NOON, Date.UTC(2026, 10, 22)];
  const windowsOf = (countsAfter: number[]): BlockWindows => ({
    counters: ['c:minute', 'c:day'],
    starts: STARTS,
    limits: [2_000_000, 100_000_000],
    countsAfter,
  });
  function blocks(maxSize = 100) {
    const handed: [string[], number][] = [];
    const quota = new QuotaBlocks({ maxSize, lifetimeMs: 1000, onUnspent: (w, n) => handed.push([[...w.counters], n]) });
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
    assert.deepEqual(handed, [[['c:minute', 'c:day'], 8]]);
    assert.equal(quota.sizeFor('k', 100), 2);
    quota.granted('k', 4, windowsOf([20, 20]), NOON + 1000);
    quota.granted('k', 4, windowsOf([24, 24]), NOON + 1001);
    assert.deepEqual(handed[1], [['c:minute', 'c:day'], 3]);
  });

  test('a block retired at a window boundary hands its rest back (each counter decides if it is still in that window)', () => {
    const { quota, handed } = blocks();
    quota.granted('k', 10, windowsOf([10, 10]), NOON + MINUTE_MS - 10);
    assert.equal(quota.spend('k', [NOON + MINUTE_MS, STARTS[1]!], NOON + MINUTE_MS), undefined);
    assert.deepEqual(handed, [[['c:minute', 'c:day'], 9]]);
  });

  test('sweep hands back expired blocks and forgets idle subjects; releaseAll hands back the rest and forgets all', () => {
    const { quota, handed } = blocks();
    quota.granted('idle', 5, windowsOf([5, 5]), NOON);
    quota.granted('busy', 7, windowsOf([7, 7]), NOON + 1500);
    quota.sweep(NOON + 1000);
    assert.deepEqual(handed, [[['c:minute', 'c:day'], 4]], 'only the expired block');
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
    assert.deepEqual(handed[1], [['c:minute', 'c:day'], 6]);
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
    assert.deepEqual(handed[2], [['c:minute', 'c:day'], 2], 'the open block, and nothing of the spent one');
    assert.equal(handed.length, 3);
    assert.equal(quota.sizeFor('kept', 100), 1, 'forgotten');
    assert.equal(quota.spend('open', STARTS, NOON + 5003), undefined);
  });
});
