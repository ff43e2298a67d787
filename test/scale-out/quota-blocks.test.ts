/**
 * Pre-admission against the real Redis: busy keys with very high limits are admitted from blocks of
 * quota taken in one call, and still never beyond their limit across instances; every standard plan
 * is decided one request at a time; unspent blocks are handed back.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { MINUTE_MS, DAY_MS } from '../../src/domain/durations.ts';
import type { RateLimiter, WindowLimit } from '../../src/limits/limiter.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createTestRedisLimiter, newKeyPrefix, REDIS_URL } from '../support/engines.ts';
import { countedIn, windowKey } from '../support/shared-counts.ts';
import { atEnd, suiteOwner } from '../support/temp.ts';
import { FakeClock } from '../support/fake-clock.ts';

const limitsOf = (perMinute: number, perDay: number): WindowLimit[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];

/** Early in a minute, so that a test's requests all fall into one minute window. */
const T0 = Date.UTC(2030, 0, 15, 10, 30, 0, 0);

/** The limiters' clock: Redis's, shifted to where the test puts it. */
const clock = new FakeClock(T0);

/** A decision taken at the moment `atMs` of the test's clock. */
function consumeAt(limiter: RateLimiter, subject: string, limits: readonly WindowLimit[], atMs: number) {
  clock.ms = atMs;
  return limiter.consume(subject, limits);
}

describe('pre-admission of busy keys', () => {
  // Undone in reverse: each limiter closed and its keys deleted, then this connection.
  const suite = suiteOwner();
  const redis = new Redis(REDIS_URL!);
  atEnd(suite, () => redis.disconnect());

  const limiterWith = (keyPrefix: string, maxBlock?: number, metrics = createMetrics()) =>
    createTestRedisLimiter({ keyPrefix, maxBlock, metrics, clock, owner: suite });
  const minuteCount = async (prefix: string, subject: string) => await countedIn(redis, `${prefix}:{${subject}}:minute:by-instance`);

  test('a busy key costs one Redis call per block, its Remaining still falls by one per request, and close hands back the rest', async () => {
    const prefix = newKeyPrefix();
    const limiter = await limiterWith(prefix);
    const limits = limitsOf(2_000_000, 100_000_000);
    const remaining: number[] = [];
    for (let i = 0; i < 300; i++) {
      const decision = await consumeAt(limiter, 'key:busy', limits, T0 + i);
      assert.equal(decision.allowed, true);
      remaining.push(decision.windows[0]!.remaining);
    }
    assert.deepEqual(
      remaining,
      remaining.map((_, i) => 2_000_000 - 1 - i),
    );
    // Blocks of 1, 2, 4, ... 128, then 100 at most: Redis counted more than was spent, never less.
    const counted = await minuteCount(prefix, 'key:busy');
    assert.ok(counted >= 300 && counted <= 300 + 100, `Redis counted ${counted} for 300 requests`);
    assert.ok(counted > 300, 'the last block is not spent yet');
    await limiter.close();
    assert.equal(await minuteCount(prefix, 'key:busy'), 300, 'the unspent requests were handed back on close');
  });

  test('requests arriving together wait for one block instead of each asking Redis, and are counted as pre-admitted', async () => {
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const limiter = await limiterWith(prefix, undefined, metrics);
    const limits = limitsOf(2_000_000, 100_000_000);
    // Warm: the key's blocks grow to the largest size.
    for (let i = 0; i < 300; i++) await consumeAt(limiter, 'key:together', limits, T0 + i);
    const decisions = await Promise.all(Array.from({ length: 2_000 }, () => consumeAt(limiter, 'key:together', limits, T0 + 400)));
    assert.ok(decisions.every((d) => d.allowed));
    // Each remaining figure is given once: no two requests were admitted from the same place.
    assert.equal(new Set(decisions.map((d) => d.windows[0]!.remaining)).size, 2_000);
    await limiter.close();
    const preadmitted = (await metrics.registry.getSingleMetric('petstore_ratelimit_preadmitted_total')!.get()).values[0]!.value;
    // 2,300 requests; blocks of up to 100 leave a few dozen Redis calls.
    assert.ok(preadmitted >= 2_150, `only ${preadmitted} of 2,300 requests were pre-admitted`);
    assert.equal(await minuteCount(prefix, 'key:together'), 2_300);
  });

  test('two instances never admit more than the limit together, and admit all of it', async () => {
    const prefix = newKeyPrefix();
    const a = await limiterWith(prefix);
    const b = await limiterWith(prefix);
    // 5,000 a minute allows blocks of 5 (a thousandth); the last 50 are decided one at a time.
    const limits = limitsOf(5_000, 1_000_000);
    let admitted = 0;
    for (let i = 0; i < 6_000; i++) {
      const limiter = i % 3 === 0 ? b : a;
      if ((await consumeAt(limiter, 'key:shared', limits, T0 + (i % 500))).allowed) admitted++;
    }
    assert.equal(admitted, 5_000);
    assert.equal(await minuteCount(prefix, 'key:shared'), 5_000);
    await a.close();
    await b.close();
    assert.equal(await minuteCount(prefix, 'key:shared'), 5_000, 'nothing to hand back once all was spent');
  });

  test('concurrent requests on two instances admit exactly the limit', async () => {
    const prefix = newKeyPrefix();
    const a = await limiterWith(prefix);
    const b = await limiterWith(prefix);
    const limits = limitsOf(4_000, 1_000_000);
    const decisions = await Promise.all(
      Array.from({ length: 5_000 }, (_, i) => consumeAt(i % 2 === 0 ? a : b, 'key:burst', limits, T0 + Math.floor(i / 20))),
    );
    // Some of the last requests may be refused while the other instance still holds part of a block;
    // whatever it holds is spent by the next requests it receives.
    const refusedEarly = decisions.filter((d) => !d.allowed).length;
    let admitted = 5_000 - refusedEarly;
    for (let i = 0; i < 200; i++) if ((await consumeAt(i % 2 === 0 ? a : b, 'key:burst', limits, T0 + 400)).allowed) admitted++;
    assert.equal(admitted, 4_000);
    assert.equal(await minuteCount(prefix, 'key:burst'), 4_000);
  });

  test('keys on the standard plans, and RATE_LIMIT_BLOCK_MAX=1, are decided one request at a time', async () => {
    const prefix = newKeyPrefix();
    const limiter = await limiterWith(prefix);
    const off = await limiterWith(prefix, 1);
    for (let i = 1; i <= 50; i++) {
      await consumeAt(limiter, 'key:business', limitsOf(1_000, 100_000), T0 + i);
      assert.equal(await minuteCount(prefix, 'key:business'), i);
      await consumeAt(off, 'key:enterprise', limitsOf(2_000_000, 100_000_000), T0 + i);
      assert.equal(await minuteCount(prefix, 'key:enterprise'), i);
    }
  });

  test('a block not spent within its second is handed back, and the next one is sized to what was spent', async () => {
    const prefix = newKeyPrefix();
    const limiter = await limiterWith(prefix);
    const limits = limitsOf(2_000_000, 100_000_000);
    for (let i = 0; i < 40; i++) await consumeAt(limiter, 'key:slowing', limits, T0 + i);
    assert.ok((await minuteCount(prefix, 'key:slowing')) > 40);
    // Two seconds later (still in the same minute) the next request retires the old block first.
    await consumeAt(limiter, 'key:slowing', limits, T0 + 2_000);
    // The hand-back and the new decision travel in order on one connection.
    const counted = await minuteCount(prefix, 'key:slowing');
    assert.ok(counted >= 41 && counted <= 41 + 40, `counted ${counted}`);
    await limiter.close();
    assert.equal(await minuteCount(prefix, 'key:slowing'), 41);
  });

  test('a block retired at a minute boundary gives the day back what it left unspent', async () => {
    const prefix = newKeyPrefix();
    const limiter = await limiterWith(prefix);
    const limits = limitsOf(2_000_000, 100_000_000);
    const dayCount = async () => await countedIn(redis, `${prefix}:{key:boundary}:day:by-instance`);
    for (let i = 0; i < 40; i++) await consumeAt(limiter, 'key:boundary', limits, T0 + 59_000 + i);
    assert.ok((await dayCount()) > 40, 'a block is held at the end of the minute');
    // The first request of the next minute retires the block (and takes a new one, handed back on close).
    await consumeAt(limiter, 'key:boundary', limits, T0 + 60_100);
    await limiter.close();
    assert.equal(await dayCount(), 41, 'the day counts exactly the 41 admitted');
  });

  test('near the end of a window blocks stop: the last requests are decided one at a time', async () => {
    const prefix = newKeyPrefix();
    const limits = limitsOf(100_000, 100_000_000);
    const counter = windowKey(prefix, 'key:late', 'minute');
    const early = await limiterWith(prefix);
    for (let i = 0; i < 100; i++) await consumeAt(early, 'key:late', limits, T0 + i);
    await early.close();
    // Other instances have used all but 15 of the minute: a block of 2 would need 20 left.
    await redis.hset(counter, 'other-instance', String(100_000 - 15 - 100));
    const late = await limiterWith(prefix);
    let admitted = 0;
    for (let i = 1; i <= 20; i++) {
      if ((await consumeAt(late, 'key:late', limits, T0 + 100 + i)).allowed) admitted++;
      assert.equal(await minuteCount(prefix, 'key:late'), 100_000 - 15 + Math.min(i, 15));
    }
    assert.equal(admitted, 15);
    // The same requests far from the limit take growing blocks.
    await redis.hdel(counter, 'other-instance');
    for (let i = 1; i <= 20; i++) await consumeAt(late, 'key:late', limits, T0 + 200 + i);
    assert.ok((await minuteCount(prefix, 'key:late')) > 20);
  });
});
