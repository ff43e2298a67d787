/**
 * The Redis limiter call by call, against a redis-server of the test's own: what the start-up check answers,
 * ready() and close(), the decisions taken without Redis (marks, looks, pre-admitted requests), the clock the
 * fallback goes by, and bringing Redis up to date when it refuses the writes at first (out of memory).
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { Clock } from '../../src/domain/clock.ts';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import type { WindowLimit } from '../../src/limits/limiter.ts';
import { RedisRateLimiter } from '../../src/limits/redis.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { newKeyPrefix } from '../support/engines.ts';
import { degraded, fallbacks, preadmitted } from '../support/limiter-metrics.ts';
import { countedIn } from '../support/shared-counts.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { freePort } from '../support/processes.ts';
import { startRedis, type RedisProcess } from '../support/redis-servers.ts';
import { atEnd, suiteOwner, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const limitsOf = (perMinute: number, perDay: number): WindowLimit[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];

interface LogLine {
  msg: string;
  err?: { message?: string };
  redisStatus?: string;
}

/** A logger whose lines the test reads. */
function recordingLog() {
  const lines: LogLine[] = [];
  return { lines, log: createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) }) };
}

describe('the Redis limiter, call by call', () => {
  // Undone in reverse: the limiters, the admin connection, Redis, then its folder.
  const suite = suiteOwner();
  const dir = tempDir(suite);
  let redis: RedisProcess;
  let admin: Redis;

  before(async () => {
    redis = await startRedis(dir, 'calls', ['enable-debug-command yes']);
    atEnd(suite, () => redis.kill()); // the one running then: a test restarts it
    admin = new Redis(redis.port, '127.0.0.1');
    admin.on('error', () => undefined); // it reconnects by itself after a restart
    atEnd(suite, () => admin.disconnect());
  });

  interface LimiterSettings {
    url?: string;
    keyPrefix?: string;
    fakeClock?: Clock;
    clock?: Clock;
    metrics?: Metrics;
    log?: ReturnType<typeof createLogger>;
    maxBlock?: number;
    timeoutMs?: number;
  }
  /** A limiter as an instance of the service has one, not waited for; closed with the suite. */
  const limiter = (s: LimiterSettings = {}) => {
    const l = new RedisRateLimiter({
      urls: [s.url ?? `redis://127.0.0.1:${redis.port}`],
      keyPrefix: s.keyPrefix,
      fakeClock: s.fakeClock,
      clock: s.clock,
      log: s.log ?? createLogger('silent'),
      metrics: s.metrics ?? createMetrics(),
      maxBlock: s.maxBlock,
      timeoutMs: s.timeoutMs,
    });
    atEnd(suite, () => l.close());
    return l;
  };
  /** A limiter on the test's clock early in a minute, connected, with metrics and a key prefix of its own. */
  const connectedOnFakeClock = async (settings: LimiterSettings = {}) => {
    const metrics = createMetrics();
    const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));
    const prefix = newKeyPrefix();
    const l = limiter({ fakeClock: clock, metrics, keyPrefix: prefix, ...settings });
    await l.ready();
    return { metrics, clock, prefix, l };
  };
  const admitted = async (l: RedisRateLimiter, subject: string, limits: WindowLimit[], n: number) => {
    let yes = 0;
    for (let i = 0; i < n; i++) if ((await l.consume(subject, limits)).allowed) yes++;
    return yes;
  };
  const redisNow = async () => {
    const [seconds, micros] = (await admin.time()) as [number, number];
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  };
  /** Calls of the limiter's scripts Redis has run since the last CONFIG RESETSTAT. */
  const scriptCalls = async () => {
    const stats = await admin.info('commandstats');
    return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
  };

  test('the start-up check: nothing once connected, the connection error when refused, at once the second time', async () => {
    const l = limiter();
    await l.ready();
    assert.equal(await l.reachableWithin(1000), undefined);
    const port = await freePort();
    const refused = limiter({ url: `redis://127.0.0.1:${port}` });
    assert.equal(await refused.reachableWithin(5000), `connect ECONNREFUSED 127.0.0.1:${port}`);
    // The error already seen is told without waiting for the next attempt.
    assert.equal(await refused.reachableWithin(1), `connect ECONNREFUSED 127.0.0.1:${port}`);
  });

  test('the start-up check of a Redis that accepts the connection but never answers: the wait it ran out of, and no listener left behind', async (t) => {
    const silent = await startRedis(dir, 'silent', []);
    atEnd(t, () => silent.kill());
    silent.child.kill('SIGSTOP');
    atEnd(t, () => void silent.child.kill('SIGCONT'));
    const warnings: Error[] = [];
    const onWarning = (w: Error) => void warnings.push(w);
    process.on('warning', onWarning);
    atEnd(t, () => void process.off('warning', onWarning));
    // The connection's own check (INFO) would fail at the command timeout: longer than this test waits.
    const l = limiter({ url: `redis://127.0.0.1:${silent.port}`, timeoutMs: 20_000 });
    assert.equal(await l.reachableWithin(300), 'no answer within 300 ms');
    for (let i = 0; i < 15; i++) await l.reachableWithin(5);
    const waiting = l.reachableWithin(20_000);
    silent.child.kill('SIGCONT');
    assert.equal(await waiting, undefined, 'connected once Redis answers');
    await sleep(10); // warnings are emitted on a later tick
    assert.deepEqual(
      warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message),
      [],
      'each check takes its listeners away',
    );
  });

  test(
    'ready() resolves at once when connected, and rejects once the limiter is closed before it ever was',
    { timeout: 10_000 },
    async () => {
      const l = limiter();
      await l.ready();
      await l.ready(); // connected already: no event left to wait for
      const refused = limiter({ url: `redis://127.0.0.1:${await freePort()}` });
      const pending = refused.ready();
      await refused.close();
      await assert.rejects(pending, /Redis connection ended/);
    },
  );

  test('closing is not an outage: no warning, and the gauge stays 0', async () => {
    const { lines, log } = recordingLog();
    const metrics = createMetrics();
    const l = limiter({ log, metrics, keyPrefix: newKeyPrefix() });
    await l.ready();
    await l.consume('key:close', limitsOf(10, 100));
    await l.close();
    await sleep(300); // the connection's close event comes after the disconnect
    assert.deepEqual(
      lines.map((line) => line.msg),
      [],
    );
    assert.equal(await degraded(metrics), 0);
  });

  test("keys are under the prefix 'petstore' unless one is set", async () => {
    const l = limiter({ fakeClock: new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5)) });
    await l.ready();
    await l.consume('key:unprefixed', limitsOf(10, 100));
    assert.equal(await admin.exists('petstore:{key:unprefixed}:minute:by-instance', 'petstore:{key:unprefixed}:day:by-instance'), 2);
  });

  test('consumeNow decides at once only from a block this instance holds, and pre-admissions reach the metric within a second or two', async () => {
    const metrics = createMetrics();
    const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));
    const l = limiter({ fakeClock: clock, metrics, keyPrefix: newKeyPrefix(), maxBlock: 100 });
    await l.ready();
    assert.equal(l.consumeNow('key:plain', limitsOf(60, 1000)), undefined, 'a standard plan always asks Redis');
    const busy = limitsOf(2_000_000, 100_000_000);
    assert.equal(l.consumeNow('key:busy', busy), undefined, 'no block yet');
    assert.equal(await admitted(l, 'key:busy', busy, 4), 4);
    const remaining: number[] = [];
    for (let d = l.consumeNow('key:busy', busy); d !== undefined; d = l.consumeNow('key:busy', busy)) {
      assert.equal(d.allowed, true);
      remaining.push(d.windows[0]!.remaining);
    }
    assert.ok(remaining.length > 0, 'the block taken by the last call is spent at once');
    assert.deepEqual(
      remaining,
      remaining.map((_, i) => 2_000_000 - 5 - i),
      'one request each',
    );
    await eventually(async () => (await preadmitted(metrics)) >= remaining.length, 5_000, 100);
  });

  test('a look tells whether a request would be admitted: not once any window is spent', async () => {
    const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));
    const l = limiter({ fakeClock: clock, keyPrefix: newKeyPrefix() });
    await l.ready();
    const limits = limitsOf(3, 100);
    await admitted(l, 'key:look', limits, 2);
    const open = await l.peek('key:look', limits);
    assert.equal(open.allowed, true);
    assert.deepEqual(
      open.windows.map((w) => w.remaining),
      [1, 98],
    );
    await admitted(l, 'key:look', limits, 1);
    const spent = await l.peek('key:look', limits);
    assert.equal(spent.allowed, false, 'the minute is spent though the day is not');
    assert.deepEqual(
      spent.windows.map((w) => w.remaining),
      [0, 97],
    );
  });

  test('a mark while Redis is slow comes from memory and is kept; Redis is brought back by the limiter itself', async () => {
    const metrics = createMetrics();
    const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));
    const l = limiter({ fakeClock: clock, metrics, keyPrefix: newKeyPrefix() });
    await l.ready();
    const stalled = admin.call('DEBUG', 'SLEEP', '0.6');
    await sleep(50);
    const until = clock.ms + 30_000;
    const first = await l.firstMark('refusals:key:m:minute:1', until);
    assert.equal(first, clock.ms);
    assert.equal(await fallbacks(metrics), 1);
    assert.equal(await degraded(metrics), 1);
    clock.advance(400);
    assert.equal(await l.firstMark('refusals:key:m:minute:1', until), first, 'the period keeps its first mark');
    await stalled;
    // No request comes: the limiter goes back to Redis by itself.
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 100);
  });

  test("the limiter's clock is Redis's once a mark has read it, carried forward by the monotonic clock", async () => {
    const aheadByAnHour: Clock = { now: () => Date.now() + 3_600_000, elapsed: () => performance.now() };
    const l = limiter({ clock: aheadByAnHour, keyPrefix: newKeyPrefix() });
    await l.ready();
    await l.firstMark('refusals:key:c:minute:1', Date.now() + 60_000);
    const drift = () => redisNow().then((ms) => Math.abs(l.now() - ms));
    assert.ok((await drift()) < 1000, 'read from the mark');
    await sleep(1500);
    const later = await drift();
    assert.ok(later < 1000, `${later} ms from Redis's clock 1.5 s later`);
    // A fake clock replaces Redis's: the limiter tells exactly its time.
    const fake = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));
    const f = limiter({ fakeClock: fake, keyPrefix: newKeyPrefix() });
    await f.ready();
    await f.consume('key:fake', limitsOf(10, 100));
    fake.advance(5_000);
    assert.equal(f.now(), fake.ms);
  });

  test('without Redis from the start: a window by a clock Redis never confirmed begins with what the one before admitted; by a known clock, each is its own', async () => {
    const nowhere = `redis://127.0.0.1:${await freePort()}`;
    const limits = limitsOf(3, 1000);
    // The instance's own clock, never checked against Redis's.
    const own = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 50));
    const unchecked = limiter({ url: nowhere, clock: own });
    assert.equal(await admitted(unchecked, 'key:own', limits, 5), 3);
    own.ms = Date.UTC(2030, 0, 15, 10, 31, 5);
    assert.equal(await admitted(unchecked, 'key:own', limits, 1), 0, 'the next minute by its clock may still be the same one by Redis’s');
    own.ms = Date.UTC(2030, 0, 15, 10, 31, 59);
    assert.equal(
      await admitted(unchecked, 'key:own', limits, 1),
      0,
      'no window by its clock begins afresh within a minute of one it admitted in',
    );
    own.ms = Date.UTC(2030, 0, 15, 10, 32, 0);
    assert.equal(await admitted(unchecked, 'key:own', limits, 5), 3, 'after a minute that admitted nothing, all of it');
    // The test's clock, which the scripts would follow too: its minutes are the windows.
    const fake = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 50));
    const known = limiter({ url: nowhere, fakeClock: fake });
    assert.equal(await admitted(known, 'key:known', limits, 5), 3);
    fake.ms = Date.UTC(2030, 0, 15, 10, 31, 5);
    assert.equal(await admitted(known, 'key:known', limits, 5), 3, 'a new minute');
  });

  test('after a slow reply only the subjects admitted in memory are sent to Redis, and every one of them is', async () => {
    const { metrics, prefix, l } = await connectedOnFakeClock();
    const limits = limitsOf(60, 1000);
    assert.equal(await admitted(l, 'key:known', limits, 5), 5);
    for (const round of [1, 2]) {
      const subject = `key:meanwhile:${round}`;
      const stalled = admin.call('DEBUG', 'SLEEP', '0.6');
      await sleep(50);
      // The first waits out the timeout (Redis runs its script once awake); the next is decided in memory at once.
      assert.equal(await admitted(l, subject, limits, 2), 2);
      assert.equal(await degraded(metrics), 1);
      await stalled;
      // The decision that timed out runs once Redis wakes, before the raise a second later: not counted as a raise.
      const key = `${prefix}:{${subject}}:minute:by-instance`;
      await eventually(async () => (await countedIn(admin, key)) >= 1, 2_000, 10);
      await admin.config('RESETSTAT');
      await eventually(async () => (await degraded(metrics)) === 0, 5_000, 50);
      assert.equal(await scriptCalls(), 1, `round ${round}: one raise, for ${subject} alone`);
      const counted = await countedIn(admin, key);
      assert.ok(counted >= 2, `Redis counts ${counted} for the 2 admitted`);
    }
  });

  test('a Redis that stops answering costs one timeout, then a second of decisions in memory: requests meanwhile send it nothing', async () => {
    const { metrics, l } = await connectedOnFakeClock();
    const limits = limitsOf(60, 1000);
    await admin.config('RESETSTAT');
    const stalled = admin.call('DEBUG', 'SLEEP', '0.8');
    await sleep(50);
    // The first waits out the timeout; the others come within the second Redis is left alone.
    assert.equal(await admitted(l, 'key:hung', limits, 3), 3);
    assert.equal(await fallbacks(metrics), 3);
    await stalled;
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 50);
    assert.equal(await scriptCalls(), 2, 'the script of the request that timed out, then one raise');
  });

  test('an outage across a minute: what the day admitted is raised though the minute has moved on with nothing of its own', async () => {
    const metrics = createMetrics();
    const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 58));
    const prefix = newKeyPrefix();
    const l = limiter({ fakeClock: clock, metrics, keyPrefix: prefix });
    await l.ready();
    const limits = limitsOf(60, 1000);
    const stalled = admin.call('DEBUG', 'SLEEP', '0.6');
    await sleep(50);
    assert.equal(await admitted(l, 'key:across', limits, 3), 3);
    clock.ms = Date.UTC(2030, 0, 15, 10, 31, 1);
    // A look in the new minute starts its count in memory, at nothing: only the day holds what was admitted.
    assert.deepEqual(
      (await l.peek('key:across', limits)).windows.map((w) => w.remaining),
      [60, 997],
    );
    await stalled;
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 50);
    const day = await countedIn(admin, `${prefix}:{key:across}:day:by-instance`);
    assert.ok(day >= 3, `Redis's day counts ${day} for the 3 admitted`);
  });

  test('a Redis that refuses writes (out of memory): the fallback decides, the raise is retried, and once Redis takes writes it holds every admission', async () => {
    const { lines, log } = recordingLog();
    const metrics = createMetrics();
    const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));
    const prefix = newKeyPrefix();
    const l = limiter({ fakeClock: clock, metrics, log, keyPrefix: prefix });
    await l.ready();
    const limits = limitsOf(60, 1000);
    assert.equal(await admitted(l, 'key:oom', limits, 5), 5);
    await admin.config('SET', 'maxmemory', '1');
    try {
      assert.equal(await admitted(l, 'key:oom', limits, 3), 3);
      assert.equal(await degraded(metrics), 1);
      const outage = lines.find((line) => /^Redis unreachable/.test(line.msg));
      assert.match(outage?.err?.message ?? '', /OOM/, 'the outage is logged with the error Redis gave');
      assert.equal(outage?.redisStatus, 'ready', 'and the connection state');
      await eventually(async () => lines.some((line) => /could not be brought up to date/.test(line.msg)), 5_000, 100);
      const refusal = lines.find((line) => /could not be brought up to date/.test(line.msg))!;
      assert.match(refusal.err?.message ?? '', /OOM/);
      assert.equal(await degraded(metrics), 1, 'still in memory');
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 100);
    assert.equal(await countedIn(admin, `${prefix}:{key:oom}:minute:by-instance`), 8);
  });

  test('a Redis restarted empty that refuses writes at first: once it takes them, every counter the instance knows is raised', async () => {
    const metrics = createMetrics();
    const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));
    const prefix = newKeyPrefix();
    const { lines, log } = recordingLog();
    const l = limiter({ fakeClock: clock, metrics, log, keyPrefix: prefix });
    await l.ready();
    assert.equal(await admitted(l, 'key:before', limitsOf(60, 5), 5), 5);
    await redis.kill();
    redis = await startRedis(dir, 'calls', ['enable-debug-command yes', 'maxmemory 1'], false, redis.port);
    await eventually(async () => lines.filter((line) => /could not be brought up to date/.test(line.msg)).length >= 2, 10_000, 100);
    await admin.config('SET', 'maxmemory', '0');
    await eventually(async () => (await degraded(metrics)) === 0, 10_000, 100);
    assert.equal(await countedIn(admin, `${prefix}:{key:before}:day:by-instance`), 5, 'the day spent before the restart');
  });
});
