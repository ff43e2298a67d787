/**
 * A worker's limiter when the process decides with Redis (src/workers/remote-limiter.ts, limiter-owner.ts), over a
 * real MessageChannel to an owner holding a real in-memory limiter: every answer is the owner's own decision, on the
 * caller's limits array; marks go through; a full table is a LimiterFullError in the worker too (its 503), any other
 * failure an Error with the owner's words; and the shared clock is the owner's offset from performance.now().
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MessageChannel } from 'node:worker_threads';
import { MINUTE_MS } from '../../src/domain/durations.ts';
import type { LimitDecision, RateLimiter, WindowLimit } from '../../src/limits/limiter.ts';
import { MemoryRateLimiter } from '../../src/limits/memory.ts';
import { NEIGHBOURHOOD, SharedTable } from '../../src/limits/shared-table.ts';
import { LimiterFullError, RECORD_FIELDS } from '../../src/limits/subject-records.ts';
import { serveLimiter } from '../../src/workers/limiter-owner.ts';
import { RemoteLimiter, SharedLimiterClock } from '../../src/workers/remote-limiter.ts';
import { FakeClock } from '../support/fake-clock.ts';

const MINUTE: WindowLimit[] = [{ name: 'minute', limit: 3, windowMs: MINUTE_MS }];

function connected(t: { after(fn: () => void): void }, owner: RateLimiter): RemoteLimiter {
  const channel = new MessageChannel();
  serveLimiter(channel.port1, owner, new Map());
  t.after(() => {
    channel.port1.close();
    channel.port2.close();
  });
  return new RemoteLimiter(channel.port2, SharedLimiterClock.create());
}

const shape = (d: LimitDecision) => ({ allowed: d.allowed, nowMs: d.nowMs, windows: d.windows });

test("a worker's decisions are the owner's, on the worker's own limits array, and its marks the owner's", async (t) => {
  const clock = new FakeClock();
  const owner = new MemoryRateLimiter({ clock, table: new SharedTable(SharedTable.allocate(NEIGHBOURHOOD * 4, RECORD_FIELDS)) });
  const remote = connected(t, owner);
  const answers = [];
  for (let i = 0; i < 5; i++) answers.push(await remote.consume('key:a', MINUTE));
  assert.deepEqual(
    answers.map((d) => [d.allowed, d.windows[0]!.remaining]),
    [
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
      [false, 0],
    ],
  );
  assert.ok(
    answers.every((d) => d.limits === MINUTE),
    'the caller keeps its limits array',
  );
  assert.deepEqual(shape(await remote.peek('key:a', MINUTE)), shape(await owner.peek('key:a', MINUTE)), 'a peek counts nothing');
  assert.equal(remote.consumeNow(), undefined, 'never decided in the worker');
  const first = await remote.firstMark('refusals:a', clock.now() + MINUTE_MS);
  clock.advance(500);
  assert.equal(await remote.firstMark('refusals:a', clock.now() + MINUTE_MS), first, 'the mark is the first one');
});

test("a full table is the worker's LimiterFullError; another failure an Error in the owner's words", async (t) => {
  const owner = new MemoryRateLimiter({
    clock: new FakeClock(),
    table: new SharedTable(SharedTable.allocate(NEIGHBOURHOOD, RECORD_FIELDS)),
  });
  const remote = connected(t, owner);
  for (let i = 0; i < NEIGHBOURHOOD; i++) await remote.consume(`addr:${i}`, MINUTE);
  await assert.rejects(remote.consume('addr:new', MINUTE), LimiterFullError);
  // The limiter refuses a window name it cannot keep: a RangeError there, its words here.
  const named = [{ name: 'fortnight', limit: 1, windowMs: 14 * 24 * 60 * MINUTE_MS }];
  await assert.rejects(
    remote.consume('addr:0', named),
    (err: Error) => !(err instanceof LimiterFullError) && /a window name is 1 to 7 ASCII characters: fortnight/.test(err.message),
  );
});

test("the shared clock: the system's until the owner sets it, then the owner's offset from the monotonic clock", () => {
  const clock = SharedLimiterClock.create();
  const before = Date.now();
  const now = clock.now();
  assert.ok(now >= before && now <= Date.now());
  const seen = new SharedLimiterClock(clock.buffer);
  clock.set(1_000_000 - performance.now());
  const read = seen.now();
  assert.ok(read >= 999_999 && read <= 1_000_010, `read ${read} through another view of the buffer`);
});
