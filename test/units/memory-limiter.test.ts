/**
 * The in-process limiter's rules one by one, with the clock in the test's hand (the embedded default, and the
 * Redis limiter's fallback): exact window edges, a wall clock stepped either way against real time, what the
 * sweep keeps, marks per subject and period, and what it takes from Redis's answers.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import type { WindowLimit } from '../../src/limits/limiter.ts';
import { MemoryRateLimiter } from '../../src/limits/memory.ts';
import { NEIGHBOURHOOD, SharedTable } from '../../src/limits/shared-table.ts';
import { LimiterFullError, RECORD_FIELDS } from '../../src/limits/subject-records.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { limitsOf, memoryLimiter, NOON } from '../support/limiter-fixtures.ts';

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
    limiter.observe('key:seen', limits, [NOON + 2 * MINUTE_MS, Date.UTC(2026, 10, 22)], [1, 1], [0, 0], 0, NOON + 2 * MINUTE_MS);
    assert.equal(limiter.size, 5, 'observe sweeps too (the ended addr:y goes), and keeps what it was told');
    assert.equal(await limiter.firstMark('m:day', Date.UTC(2026, 10, 23)), NOON + MINUTE_MS, 'a live mark outlives the sweep');
    await limiter.close();
    assert.equal(limiter.size, 0, 'close forgets counters and marks');
  });

  test('the sweep keeps a window begun mid-way past its end, until its length since it began: a clock then stepped back continues it', () => {
    const { clock, limiter } = memoryLimiter(NOON + 10_000);
    const limits = [{ name: 'minute', limit: 3, windowMs: MINUTE_MS }];
    assert.equal(admittedOf(limiter, 'addr:x', limits, 1), 1, 'a sweep, the next due a minute later');
    clock.ms = NOON + 50_000;
    assert.equal(admittedOf(limiter, 'key:a', limits, 5), 3, 'begun 10 s before its end');
    clock.ms = NOON + 71_000; // ended by the wall clock, and the next sweep is due
    assert.equal(admittedOf(limiter, 'addr:y', limits, 1), 1);
    assert.equal(limiter.size, 2, 'key:a is kept through the sweep, addr:x is not');
    clock.step(-16_000); // back into the window key:a began in, within its length since then
    assert.equal(admittedOf(limiter, 'key:a', limits, 1), 0, 'not reopened');
    clock.ms += 40_000; // its length since it began has passed: the window the wall clock names is a new one
    assert.equal(admittedOf(limiter, 'key:a', limits, 5), 3);
  });

  test('a wall clock stepped forward neither ends a window early nor, stepped back, reopens it', () => {
    const { clock, limiter } = memoryLimiter(NOON + 10_000);
    const limits = [{ name: 'minute', limit: 3, windowMs: MINUTE_MS }];
    assert.equal(admittedOf(limiter, 'key:a', limits, 5), 3);
    clock.step(DAY_MS);
    const refused = limiter.consumeNow('key:a', limits);
    assert.equal(refused.allowed, false, 'a day ahead, the minute still has 50 s of real time');
    assert.equal(refused.windows[0]!.resetAtMs, clock.now() + 50_000, 'told as the real time it has left');
    clock.step(-DAY_MS - 30_000); // 11:59:40 by the wall clock: before the window
    assert.equal(limiter.consumeNow('key:a', limits).allowed, false, 'stepped back, the same window goes on');
    clock.advance(50_000); // its 50 s of real time have passed: 12:00:30 by the wall clock, the window it counted
    assert.equal(limiter.consumeNow('key:a', limits).allowed, false, 'not reopened within its length since it began counting');
    clock.advance(10_000); // a minute of real time since it began counting
    assert.equal(admittedOf(limiter, 'key:a', limits, 5), 3, 'a window never counts longer than its length');
  });

  test('a clock stepped a day forward and back holds a window no longer than its length (the next one begins on the true clock)', () => {
    const { clock, limiter } = memoryLimiter(NOON);
    const limits = [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }];
    clock.step(DAY_MS);
    assert.equal(admittedOf(limiter, 'key:d', limits, 6), 5);
    clock.step(-DAY_MS);
    const refused = limiter.consumeNow('key:d', limits);
    assert.ok(refused.windows[0]!.resetAtMs - clock.now() <= MINUTE_MS, 'Retry-After never promises more than a minute');
    clock.advance(MINUTE_MS);
    const next = limiter.consumeNow('key:d', limits);
    assert.equal(next.allowed, true, 'a minute of real time later, a new window');
    assert.equal(next.windows[0]!.resetAtMs, NOON + 2 * MINUTE_MS, 'named by the wall clock as it now reads');
  });

  test('a window begun mid-way by the wall clock lasts only what it has left, and its successor begins on the next edge', () => {
    const { clock, limiter } = memoryLimiter(NOON + 45_000);
    const limits = [{ name: 'minute', limit: 2, windowMs: MINUTE_MS }];
    assert.equal(admittedOf(limiter, 'key:m', limits, 3), 2);
    clock.advance(15_000);
    assert.equal(admittedOf(limiter, 'key:m', limits, 3), 2, 'the next minute at 12:01:00');
    clock.step(-59_000); // back to 12:00:01: the minute of 12:00 began counting 75 s ago, so it is not reopened
    const after = limiter.consumeNow('key:m', limits);
    assert.equal(after.allowed, false, 'the 12:01 window goes on: it began 0 s ago in real time');
  });

  test("unanchored (a Redis fallback that never heard Redis's clock): a window begins with what the one before admitted", () => {
    const clock = new FakeClock(NOON + 50_000);
    const limiter = new MemoryRateLimiter({ clock, unanchored: () => true });
    const limits = [{ name: 'minute', limit: 3, windowMs: MINUTE_MS }];
    assert.equal(admittedOf(limiter, 'key:u', limits, 2), 2);
    clock.advance(11_000); // 12:01:01 by this clock
    const next = limiter.consumeNow('key:u', limits);
    assert.equal(next.allowed, true);
    assert.equal(next.windows[0]!.remaining, 0, 'the two of the minute before count: its clock may be off from the true one');
    assert.equal(limiter.consumeNow('key:u', limits).allowed, false);
    clock.advance(MINUTE_MS);
    assert.equal(admittedOf(limiter, 'key:u', limits, 5), 2, 'the one of the minute before counts against this one');
    const anchored = memoryLimiter(NOON + 50_000);
    assert.equal(admittedOf(anchored.limiter, 'key:u', limits, 2), 2);
    anchored.clock.advance(11_000);
    assert.equal(admittedOf(anchored.limiter, 'key:u', limits, 5), 3, 'anchored, each minute is its own');
  });

  test("anchored at last (Redis's clock read): each window is renamed to Redis's, keeping what was admitted within a window's length", () => {
    const clock = new FakeClock(NOON + 10_000);
    let anchored = false;
    const limiter = new MemoryRateLimiter({ clock, unanchored: () => !anchored });
    const minute = [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }];
    assert.equal(admittedOf(limiter, 'key:live', minute, 2), 2);
    assert.equal(admittedOf(limiter, 'key:ended', minute, 3), 3);
    clock.advance(MINUTE_MS); // 12:01:10 by this clock: key:live's next minute carries its 2; key:ended's ended 10 s ago
    assert.equal(admittedOf(limiter, 'key:live', minute, 1), 1);
    const changes = new Map(limiter.current()).get('key:live')!.changes;
    // Redis's clock is 40 s behind this one: 12:00:30 by it.
    const redisNow = NOON + 30_000;
    limiter.anchor(redisNow);
    anchored = true;
    const held = new Map(limiter.current());
    for (const subject of ['key:live', 'key:ended']) {
      const counts = held.get(subject);
      assert.ok(counts, `${subject} is current again, in Redis's minute`);
      assert.deepEqual(
        counts.counters.map((c) => [c.start, c.end, c.own, c.others]),
        [[NOON, NOON + MINUTE_MS, 3, 0]],
        subject,
      );
      assert.equal(counts.unsynced, true, `${subject} is raised next`);
    }
    assert.ok(held.get('key:live')!.changes > changes, 'a change that a raise on its way did not include');
    assert.equal(limiter.decide('key:ended', minute, redisNow, true).windows[0]!.remaining, 1, 'its three, and this one');
    assert.equal(limiter.decide('key:ended', minute, redisNow, true).windows[0]!.remaining, 0);
    assert.equal(limiter.decide('key:ended', minute, redisNow, true).allowed, false);
    // The minute lasts until Redis's clock ends it: 30 s of real time.
    clock.advance(29_999);
    assert.equal(limiter.decide('key:live', minute, redisNow + 29_999, true).windows[0]!.remaining, 1);
    clock.advance(1);
    assert.equal(limiter.decide('key:live', minute, redisNow + 30_000, true).windows[0]!.remaining, 4, 'the next minute is its own');
  });

  test('anchored, a window that ended its length ago or longer keeps nothing; one that ends at that moment keeps only its own', () => {
    const clock = new FakeClock(NOON + 10_000);
    const limiter = new MemoryRateLimiter({ clock, unanchored: () => true });
    const minute = [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }];
    assert.equal(admittedOf(limiter, 'key:old', limitsOf(5, 100), 3), 3); // its minute ends 50 s from now
    assert.equal(admittedOf(limiter, 'key:edge', minute, 2), 2);
    clock.advance(MINUTE_MS); // 12:01:10
    assert.equal(admittedOf(limiter, 'key:edge', minute, 1), 1); // the 2 carried into 12:01's minute, which ends 50 s from now
    clock.advance(50_000); // key:old's minute ended exactly a minute ago; key:edge's ends now
    limiter.anchor(clock.now());
    const held = new Map(limiter.current());
    assert.deepEqual(
      held.get('key:old')!.counters.map((c) => c.own),
      [0, 3],
      'the minute keeps nothing, the day all',
    );
    assert.deepEqual(
      held.get('key:edge')!.counters.map((c) => c.own),
      [1],
      'its own, not what was carried into it',
    );
  });

  test('observe moves a window to the start Redis names, with its own part from that answer; an answer for a window this instance has left changes nothing', () => {
    const { clock, limiter } = memoryLimiter(NOON + 5_000);
    const minute = [{ name: 'minute', limit: 10, windowMs: MINUTE_MS }];
    assert.equal(limiter.observe('key:a', minute, [NOON], [4], [2], 2, NOON + 5_000), false);
    const counter = () => [...limiter.current()][0]![1].counters[0]!;
    assert.equal([...limiter.current()][0]![1].unsynced, false, 'Redis holds what was admitted here');
    clock.ms = NOON + MINUTE_MS + 1_000;
    assert.equal(limiter.observe('key:a', minute, [NOON + MINUTE_MS], [3], [1], 1, NOON + MINUTE_MS + 1_000), false);
    const c = counter();
    assert.deepEqual([c.start, c.end, c.own, c.others], [NOON + MINUTE_MS, NOON + 2 * MINUTE_MS, 1, 2]);
    assert.equal(c.endsAtElapsed - clock.elapsed(), 59_000, 'it ends where Redis names its end');
    assert.equal(limiter.observe('key:a', minute, [NOON], [9], [5], 1, NOON + MINUTE_MS + 1_000), false, 'a late answer');
    const after = counter();
    assert.deepEqual([after.start, after.own, after.others], [NOON + MINUTE_MS, 1, 2]);
  });

  test('a block handed back takes its unspent requests from the windows that still start where it was granted; a lost answer marks the subject', () => {
    const { limiter } = memoryLimiter(NOON + 5_000);
    const day = Date.UTC(2026, 10, 22);
    assert.equal(admittedOf(limiter, 'key:a', limitsOf(10, 100), 5), 5);
    const counts = () => [...limiter.current()][0]![1];
    const own = () => counts().counters.map((c) => c.own);
    limiter.adjustOwn('key:a', [NOON, day], -2);
    assert.deepEqual(own(), [3, 3]);
    limiter.adjustOwn('key:a', [NOON - MINUTE_MS, day], -1);
    assert.deepEqual(own(), [3, 2], 'a minute that has moved on keeps its count');
    limiter.adjustOwn('key:a', [NOON, day], -10);
    assert.deepEqual(own(), [0, 0], 'never below nothing');
    limiter.markSynced('key:a', counts().changes); // as a raise that went through leaves it
    assert.equal(counts().unsynced, false);
    const changes = counts().changes;
    limiter.markUnsynced('key:a');
    assert.equal(counts().unsynced, true);
    assert.notEqual(counts().changes, changes, 'a raise on its way no longer settles it');
    limiter.markSynced('key:a', changes);
    assert.equal(counts().unsynced, true, 'a raise that did not carry the latest change leaves it unsynced');
    limiter.adjustOwn('key:unknown', [NOON, day], -1);
    limiter.markUnsynced('key:unknown');
    assert.equal(limiter.size, 1, 'a subject it does not hold is not made up');
  });

  test("a wall clock off by less than a second from the window's count tells the window's own edge as its reset; a second or more, the real end", () => {
    const { clock, limiter } = memoryLimiter(NOON + 10_000);
    const minute = [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }];
    const resetAt = () => limiter.consumeNow('key:a', minute).windows[0]!.resetAtMs;
    assert.equal(resetAt(), NOON + MINUTE_MS);
    clock.step(400);
    assert.equal(resetAt(), NOON + MINUTE_MS, '400 ms off: the edge');
    clock.step(600);
    assert.equal(resetAt(), NOON + MINUTE_MS + 1000, 'a second off: the real end, 50 s from now');
    clock.step(-1600);
    assert.equal(resetAt(), NOON + MINUTE_MS, '600 ms off the other way: the edge');
  });

  test('a window stepped back into goes on until exactly its length since it began, then the one the wall clock names begins', () => {
    const { clock, limiter } = memoryLimiter(NOON + 5_000);
    const minute = [{ name: 'minute', limit: 3, windowMs: MINUTE_MS }];
    admittedOf(limiter, 'key:other', minute, 1); // the first sweep, the next due a minute later
    clock.advance(5_000);
    assert.equal(admittedOf(limiter, 'key:a', minute, 3), 3, 'begun at 12:00:10');
    clock.advance(55_000); // 12:01:05, in the next minute
    clock.step(-30_000); // back to 12:00:35, in the minute it counted
    admittedOf(limiter, 'key:other', minute, 1); // the sweep runs now, not at the moment looked at
    clock.advance(4_999); // 59.999 s since it began
    assert.equal(admittedOf(limiter, 'key:a', minute, 1), 0, 'the minute goes on');
    clock.advance(1);
    assert.equal(admittedOf(limiter, 'key:a', minute, 5), 3, 'its length has passed: a new count');
  });

  test('unanchored, what a window admitted is carried into the next only while less than its length has passed since it ended', () => {
    for (const [sinceEndMs, admitted] of [
      [MINUTE_MS - 1, 1],
      [MINUTE_MS, 3],
    ] as const) {
      const clock = new FakeClock(NOON + 50_000);
      const limiter = new MemoryRateLimiter({ clock, unanchored: () => true });
      const minute = [{ name: 'minute', limit: 3, windowMs: MINUTE_MS }];
      assert.equal(admittedOf(limiter, 'key:u', minute, 2), 2);
      clock.advance(MINUTE_MS);
      admittedOf(limiter, 'key:other', minute, 1); // the sweep runs now, not at the moment looked at
      clock.advance(10_000 + sinceEndMs - MINUTE_MS);
      assert.equal(admittedOf(limiter, 'key:u', minute, 5), admitted, `${sinceEndMs} ms after its end`);
    }
  });

  test("observe takes Redis's totals as others' counts beside this instance's own; current lists them", () => {
    const { limiter } = memoryLimiter(NOON + 5_000);
    const limits = limitsOf(60, 1_000);
    const differs = limiter.observe('key:a', limits, [NOON, Date.UTC(2026, 10, 22)], [58, 990], [1, 1], 1, NOON + 5_000);
    assert.equal(differs, false, 'Redis holds the one this answer admitted here');
    assert.equal(admittedOf(limiter, 'key:a', limits, 5), 2);
    const [only] = [...limiter.current()];
    const [subject, counts] = only!;
    assert.equal(subject, 'key:a');
    assert.deepEqual(
      counts.counters.map((c) => [c.name, c.own, c.others, c.end]),
      [
        ['minute', 3, 57, NOON + MINUTE_MS],
        ['day', 3, 989, Date.UTC(2026, 10, 23)],
      ],
    );
    assert.equal(counts.unsynced, true, 'admitted in memory: Redis does not have those two');
  });

  test("observe says when Redis's part for this instance is not what it admitted, and a later window starts from Redis's", () => {
    const { clock, limiter } = memoryLimiter(NOON + 5_000);
    const limits = limitsOf(10, 1_000);
    const starts = [NOON, Date.UTC(2026, 10, 22)];
    assert.equal(limiter.observe('key:a', limits, starts, [5, 5], [1, 1], 1, NOON + 5_000), false);
    assert.equal(limiter.observe('key:a', limits, starts, [7, 7], [3, 3], 1, NOON + 5_000), true, 'one more than admitted here');
    const counts = [...limiter.current()][0]![1];
    assert.equal(counts.unsynced, true);
    assert.deepEqual(
      counts.counters.map((c) => c.own),
      [2, 2],
      'its own count stays what it admitted',
    );
    clock.ms = NOON + MINUTE_MS;
    limiter.observe('key:a', limits, [NOON + MINUTE_MS, starts[1]!], [1, 8], [1, 3], 1, NOON + MINUTE_MS);
    assert.deepEqual(
      limiter.consumeNow('key:a', limits).windows.map((w) => w.remaining),
      [8, 991],
      'a new minute from what Redis said; the day from the others it holds and the three here',
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

  test('a table full of live windows refuses a new subject and forgets none; once windows end, they make room', () => {
    const clock = new FakeClock(NOON);
    const table = new SharedTable(SharedTable.allocate(NEIGHBOURHOOD, RECORD_FIELDS));
    const limiter = new MemoryRateLimiter({ clock, table });
    const minute = [{ name: 'minute', limit: 2, windowMs: MINUTE_MS }];
    for (let i = 0; i < NEIGHBOURHOOD; i++) assert.equal(admittedOf(limiter, `addr:${i}`, minute, 1), 1);
    assert.throws(() => limiter.consumeNow('addr:new', minute), LimiterFullError);
    clock.advance(30_000);
    assert.throws(() => limiter.consumeNow('addr:new', minute), LimiterFullError, 'no window has ended yet');
    for (let i = 0; i < NEIGHBOURHOOD; i++)
      assert.equal(limiter.consumeNow(`addr:${i}`, minute).windows[0]!.remaining, 0, `addr:${i} kept its count`);
    clock.advance(30_000);
    assert.equal(limiter.consumeNow('addr:new', minute).windows[0]!.remaining, 1, 'the ended windows were swept for it');
  });

  test('a full table sweeps for a new subject at most once a second, and not only when its regular sweep is due', () => {
    // Windows of 10 s, filled at the start of one: they end 50 s before the regular sweep (once a minute) is due.
    const clock = new FakeClock(NOON);
    const table = new SharedTable(SharedTable.allocate(NEIGHBOURHOOD, RECORD_FIELDS));
    const limiter = new MemoryRateLimiter({ clock, table });
    const burst = [{ name: 'burst', limit: 2, windowMs: 10_000 }];
    for (let i = 0; i < NEIGHBOURHOOD; i++) assert.equal(admittedOf(limiter, `addr:${i}`, burst, 1), 1);
    clock.advance(9_600);
    assert.throws(() => limiter.consumeNow('addr:new', burst), LimiterFullError, 'swept, and every window still live');
    clock.advance(600); // the windows have ended, 0.6 s after that sweep
    assert.throws(() => limiter.consumeNow('addr:new', burst), LimiterFullError, 'no second sweep within the second');
    clock.advance(400); // a second after the first
    assert.equal(limiter.consumeNow('addr:new', burst).windows[0]!.remaining, 1, 'swept again, and room made');
  });

  test('window names are 1 to 7 printable ASCII characters, and a subject has at most three windows: anything else is refused', () => {
    const { limiter } = memoryLimiter();
    const window = (name: string) => ({ name, limit: 5, windowMs: MINUTE_MS });
    assert.throws(() => limiter.consumeNow('key:a', [window('fortnight')]), RangeError, 'eight characters');
    assert.throws(() => limiter.consumeNow('key:a', [window('a week')]), RangeError, 'a space');
    assert.throws(() => limiter.consumeNow('key:a', [window('minute'), window('hour'), window('day'), window('week')]), RangeError);
    // Names are the code's own, never a client's: a refused one is a mistake in the code, and counts nothing.
    assert.deepEqual(
      limiter.consumeNow('key:a', [window('minute'), window('hour'), window('day')]).windows.map((w) => w.remaining),
      [4, 4, 4],
    );
  });

  test('limiters sharing a table: one closed leaves the others their counts; a table laid out for other records is refused', async () => {
    const clock = new FakeClock(NOON);
    const table = new SharedTable(SharedTable.allocate(NEIGHBOURHOOD * 2, RECORD_FIELDS));
    const [a, b] = [new MemoryRateLimiter({ clock, table }), new MemoryRateLimiter({ clock, table })];
    const limits = limitsOf(3, 10);
    assert.equal(admittedOf(a, 'key:shared', limits, 2), 2);
    await a.close();
    assert.equal(admittedOf(b, 'key:shared', limits, 5), 1, 'the one left of three');
    assert.throws(() => new MemoryRateLimiter({ clock, table: new SharedTable(SharedTable.allocate(NEIGHBOURHOOD, RECORD_FIELDS + 1)) }));
  });

  test("a refusal's mark is not a subject: the counts a raise sends leave it out, and it goes at its period's end", () => {
    const { clock, limiter } = memoryLimiter();
    assert.equal(limiter.mark('refusals:key:a:minute:1', clock.ms, clock.ms + 30_000), clock.ms);
    admittedOf(limiter, 'key:a', limitsOf(3, 10), 1);
    assert.deepEqual(
      [...limiter.current()].map(([subject]) => subject),
      ['key:a'],
    );
    assert.equal(limiter.size, 2, 'the mark and the subject');
    const first = clock.ms;
    clock.advance(10_000);
    assert.equal(limiter.mark('refusals:key:a:minute:1', clock.ms, first + 30_000), first, 'kept until its end');
    clock.advance(25_000);
    assert.equal(limiter.mark('refusals:key:a:minute:2', clock.ms, clock.ms + 30_000), clock.ms, 'ended, not yet swept: anew');
    clock.advance(2 * MINUTE_MS);
    admittedOf(limiter, 'key:b', limitsOf(3, 10), 1); // a minute of traffic later, the sweep has run
    assert.equal(limiter.mark('refusals:key:a:minute:1', clock.ms, clock.ms + 30_000), clock.ms, 'a new period, a new mark');
  });

  test('a limiter given no table holds thousands of clients; at a full one, a new mark is refused like a new subject', () => {
    const { limiter } = memoryLimiter();
    const minute = [{ name: 'minute', limit: 2, windowMs: MINUTE_MS }];
    for (let i = 0; i < 5_000; i++) assert.equal(limiter.consumeNow(`addr:${i}`, minute).allowed, true, `addr:${i}`);
    const clock = new FakeClock(NOON);
    const full = new MemoryRateLimiter({ clock, table: new SharedTable(SharedTable.allocate(NEIGHBOURHOOD, RECORD_FIELDS)) });
    for (let i = 0; i < NEIGHBOURHOOD; i++) full.consumeNow(`addr:${i}`, minute);
    assert.throws(
      () => full.mark('refusals:addr:0:minute:1', clock.ms, clock.ms + 30_000),
      (err: Error) => err instanceof LimiterFullError && err.name === 'LimiterFullError' && /RATE_LIMIT_MEMORY_BYTES/.test(err.message),
    );
  });
});
