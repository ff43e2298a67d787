/**
 * The shared limiter when Redis misbehaves the way it does in operation: a reply slower than the
 * limiter's timeout (DEBUG SLEEP), and a Redis restarted empty. Against a redis-server of the test's
 * own on a spare port; the limiters follow one fake clock, so every decision falls in one minute and
 * one day whatever the real time.
 */
import assert from 'node:assert/strict';
import { before, describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import { windowStart, type WindowLimit } from '../../src/limits/limiter.ts';
import { RedisRateLimiter } from '../../src/limits/redis.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createTestRedisLimiter, newKeyPrefix } from '../support/engines.ts';
import { degraded, fallbacks } from '../support/limiter-metrics.ts';
import { countedIn, windowKey } from '../support/shared-counts.ts';
import { startRedis, type RedisProcess } from '../support/redis-servers.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';
import { atEnd, suiteOwner, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';
import { FakeClock } from '../support/fake-clock.ts';

const limitsOf = (perMinute: number, perDay: number): WindowLimit[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];

/** Early in a minute, so that a test's decisions fall into one minute and one day. */
const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));

describe('the Redis limiter when Redis is slow or restarts empty', () => {
  // Undone in reverse: the limiters, the admin connection, Redis, then its folder.
  const suite = suiteOwner();
  const dir = tempDir(suite);
  const REDIS_LINES = ['enable-debug-command yes'];
  let redis: RedisProcess;
  let admin: Redis;

  before(async () => {
    redis = await startRedis(dir, 'faults', REDIS_LINES);
    atEnd(suite, () => redis.kill()); // the one running then: a test restarts it
    admin = new Redis(redis.port, '127.0.0.1', { lazyConnect: true });
    admin.on('error', () => undefined); // it reconnects by itself after the restart
    atEnd(suite, () => admin.disconnect());
  });

  /** A limiter on the test's Redis (which goes with its keys), as an instance of the service has one, closed with the suite. */
  const limiter = (metrics = createMetrics(), keyPrefix = newKeyPrefix(), url = `redis://127.0.0.1:${redis.port}`) =>
    createTestRedisLimiter({ url, keyPrefix, clock, metrics, owner: suite });
  /** n decisions in a row; how many were admitted. */
  const admitted = async (l: RedisRateLimiter, subject: string, limits: WindowLimit[], n: number) => {
    let yes = 0;
    for (let i = 0; i < n; i++) if ((await l.consume(subject, limits)).allowed) yes++;
    return yes;
  };
  /** Redis asleep for `seconds`, from another connection: every command queues behind it. */
  const stall = (seconds: number) => admin.call('DEBUG', 'SLEEP', String(seconds));

  // Every decision and raise that times out while Redis hangs runs once it is back, late: none counts again.
  for (const fault of ['paused (SIGSTOP) with its connections open', 'asleep for 7 s (DEBUG SLEEP)'] as const) {
    test(`a Redis ${fault} while a key keeps sending: once back, it holds each admission once, in the minute and the day`, async (t) => {
      const metrics = createMetrics();
      const prefix = newKeyPrefix();
      const l = await limiter(metrics, prefix);
      const limits = limitsOf(60, 1_000);
      let yes = await admitted(l, 'key:hung', limits, 1);
      const paused = fault.startsWith('paused');
      let asleep: Promise<unknown> | undefined;
      if (paused) {
        redis.child.kill('SIGSTOP');
        atEnd(t, () => void redis.child.kill('SIGCONT'));
      } else asleep = stall(7);
      for (let i = 0; i < (paused ? 40 : 16); i++) {
        if ((await l.consume('key:hung', limits)).allowed) yes++;
        await sleep(450);
      }
      if (paused) redis.child.kill('SIGCONT');
      await asleep;
      await eventually(async () => (await degraded(metrics)) === 0, 10_000, 100);
      await sleep(300); // anything Redis still had queued has run
      assert.equal(await countedIn(admin, windowKey(prefix, 'key:hung', 'minute')), yes, `${yes} admitted`);
      assert.equal(await countedIn(admin, windowKey(prefix, 'key:hung', 'day')), yes);
      assert.equal(await admitted(l, 'key:hung', limits, 70), 60 - yes, 'a client that honoured every limit gets the rest of its minute');
    });
  }

  test('a reply slower than the timeout: the fallback starts from what Redis last gave, so a spent minute stays spent', async () => {
    const metrics = createMetrics();
    const lines: string[] = [];
    const l = await createTestRedisLimiter({
      url: `redis://127.0.0.1:${redis.port}`,
      keyPrefix: newKeyPrefix(),
      clock,
      metrics,
      log: createLogger('info', { write: (line: string) => void lines.push(line) }),
      owner: suite,
    });
    assert.equal(await degraded(metrics), 0, 'shared from the start');
    const limits = limitsOf(60, 1_000);
    assert.equal(await admitted(l, 'key:slow', limits, 70), 60);
    const stalled = stall(0.6);
    await sleep(50);
    // Decided in memory (Redis does not answer within 250 ms), from the 60 Redis counted.
    assert.equal(await admitted(l, 'key:slow', limits, 60), 0);
    assert.equal(await degraded(metrics), 1, 'the instance says it is limiting in memory');
    await stalled;
    // Back to Redis by itself, without a request to set it going.
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 100);
    assert.equal(await admitted(l, 'key:slow', limits, 10), 0);
    const inMemory = await fallbacks(metrics);
    assert.ok(inMemory >= 60, `${inMemory} decisions counted as taken in memory`);
    const said = lines.map((line) => (JSON.parse(line) as { msg: string }).msg);
    assert.deepEqual(
      said.filter((m) => /Redis/.test(m)).map((m) => m.replace(/:.*/s, '')),
      ['Redis unreachable', 'Redis reachable again'],
      'the outage is logged once, as an outage, and its end once',
    );
  });

  test('a spent day stays spent through a slow reply', async () => {
    const metrics = createMetrics();
    const l = await limiter(metrics);
    const limits = limitsOf(100, 5);
    assert.equal(await admitted(l, 'key:day', limits, 8), 5);
    const stalled = stall(0.6);
    await sleep(50);
    assert.equal(await admitted(l, 'key:day', limits, 20), 0);
    // Redis, waited for, would have refused them too: the fallback decided every one.
    assert.equal(await fallbacks(metrics), 20, 'decided in memory');
    assert.equal(await degraded(metrics), 1);
    await stalled;
  });

  test('what the fallback admitted is added to Redis when it answers again: the instance never passes the limit, nor does another', async () => {
    const metrics = createMetrics();
    const prefix = newKeyPrefix();
    const a = await limiter(metrics, prefix);
    const limits = limitsOf(60, 1_000);
    assert.equal(await admitted(a, 'key:half', limits, 30), 30);
    const stalled = stall(0.6);
    await sleep(50);
    // In memory: the 30 left of the 60 Redis allowed, and no more.
    assert.equal(await admitted(a, 'key:half', limits, 50), 30);
    assert.equal(await fallbacks(metrics), 50, 'decided in memory, not by Redis once awake');
    assert.equal(await degraded(metrics), 1);
    await stalled;
    await eventually(async () => (await a.consume('key:half', limits), (await degraded(metrics)) === 0), 5_000, 100);
    // Redis holds every admission: the 60, and possibly once more the request whose script Redis ran
    // after the limiter had stopped waiting for it (the fallback decided it too), never fewer.
    const counter = await countedIn(admin, `${prefix}:{key:half}:minute:by-instance`);
    assert.ok(counter >= 60 && counter <= 61, `Redis counts ${counter} for the 60 admitted`);
    const b = await limiter(createMetrics(), prefix);
    assert.equal(await admitted(b, 'key:half', limits, 5), 0, 'another instance finds the minute spent');
  });

  test('Redis decides again after a slow reply while requests keep coming, and holds every admission made meanwhile', async () => {
    const metrics = createMetrics();
    const prefix = newKeyPrefix();
    const l = await limiter(metrics, prefix);
    const limits = limitsOf(900, 100_000);
    let running = true;
    let admittedAll = 0;
    const worker = async () => {
      while (running) {
        if ((await l.consume('key:busy', limits)).allowed) admittedAll++;
        await new Promise((resolve) => setImmediate(resolve)); // as requests arriving over sockets do
      }
    };
    const workers = Array.from({ length: 4 }, worker);
    try {
      await sleep(100);
      await stall(0.4);
      assert.ok((await fallbacks(metrics)) > 0, 'the fallback decided while Redis slept');
      await eventually(async () => (await degraded(metrics)) === 0, 5_000, 50);
    } finally {
      // Workers left running would keep the file from ever ending.
      running = false;
      await Promise.all(workers);
    }
    const counted = await countedIn(admin, `${prefix}:{key:busy}:minute:by-instance`);
    assert.ok(admittedAll > 0 && counted >= admittedAll, `Redis counts ${counted} for ${admittedAll} admitted`);
  });

  test('one instance cut off from Redis while another counts on: what it admitted alone is added to what Redis counted meanwhile', async (t) => {
    const metricsA = createMetrics();
    const prefix = newKeyPrefix();
    const proxy = await TcpProxy.start('127.0.0.1', redis.port);
    t.after(() => proxy.close());
    const a = await limiter(metricsA, prefix, `redis://127.0.0.1:${proxy.port}`);
    const b = await limiter(createMetrics(), prefix);
    const limits = limitsOf(60, 1_000);
    assert.equal(await admitted(a, 'key:split', limits, 10), 10);
    proxy.cut();
    assert.equal(await admitted(a, 'key:split', limits, 5), 5, 'a, alone, admits from the 10 it saw');
    assert.equal(await admitted(b, 'key:split', limits, 20), 20, 'b counts on in Redis');
    proxy.heal();
    await eventually(async () => (await degraded(metricsA)) === 0, 10_000, 100);
    assert.equal(
      await countedIn(admin, `${prefix}:{key:split}:minute:by-instance`),
      35,
      '10 + 20 counted in Redis, and the 5 a admitted alone',
    );
  });

  test('a minute that turns while an instance is cut off loses nothing of the day it admitted meanwhile', async (t) => {
    const metrics = createMetrics();
    const prefix = newKeyPrefix();
    const proxy = await TcpProxy.start('127.0.0.1', redis.port);
    t.after(() => proxy.close());
    const saved = clock.ms;
    t.after(() => (clock.ms = saved));
    clock.ms = Date.UTC(2030, 0, 15, 10, 40, 50);
    const a = await limiter(metrics, prefix, `redis://127.0.0.1:${proxy.port}`);
    const limits = limitsOf(100, 1_000);
    assert.equal(await admitted(a, 'key:turn', limits, 10), 10);
    proxy.cut();
    assert.equal(await admitted(a, 'key:turn', limits, 5), 5);
    clock.ms = Date.UTC(2030, 0, 15, 10, 41, 5); // the next minute, still cut off
    assert.equal(await admitted(a, 'key:turn', limits, 7), 7);
    proxy.heal();
    await eventually(async () => (await degraded(metrics)) === 0, 10_000, 100);
    assert.equal(await countedIn(admin, `${prefix}:{key:turn}:day:by-instance`), 22, 'the day holds all 22');
    assert.equal(await countedIn(admin, `${prefix}:{key:turn}:minute:by-instance`), 7, 'the new minute its 7');
  });

  test('a Redis restarted between two requests is brought up to date when the connection comes back, before anyone asks', async () => {
    const metrics = createMetrics();
    const prefix = newKeyPrefix();
    const l = await limiter(metrics, prefix);
    const limits = limitsOf(100, 5);
    assert.equal(await admitted(l, 'key:quiet', limits, 5), 5);
    await redis.kill();
    redis = await startRedis(dir, 'faults', REDIS_LINES, false, redis.port);
    await eventually(async () => (await countedIn(admin, `${prefix}:{key:quiet}:day:by-instance`).catch(() => 0)) === 5, 10_000, 100);
    await eventually(async () => (await degraded(metrics)) === 0, 10_000, 100);
    assert.equal(await admitted(await limiter(createMetrics(), prefix), 'key:quiet', limits, 1), 0);
  });

  test("the fallback keeps Redis's clock: an instance clock that jumps moves no window", async (t) => {
    const prefix = newKeyPrefix();
    const l = new RedisRateLimiter({
      urls: [`redis://127.0.0.1:${redis.port}`],
      keyPrefix: prefix,
      log: createLogger('silent'),
      metrics: createMetrics(),
    });
    atEnd(suite, () => l.close());
    await l.ready();
    const redisNow = async () => {
      const [seconds, micros] = (await admin.call('TIME')) as [string, string];
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };
    await l.consume('key:clock', limitsOf(100, 1_000));
    const real = Date.now;
    t.after(() => (Date.now = real));
    Date.now = () => real() - 3_600_000; // the instance's clock an hour behind
    const drift = Math.abs(l.now() - (await redisNow()));
    Date.now = real;
    assert.ok(drift < 1000, `the limiter's clock is ${drift} ms from Redis's`);
  });

  test("instances share a key's first refusal of a window, and its counts, through Redis", async () => {
    const prefix = newKeyPrefix();
    const [a, b] = [await limiter(createMetrics(), prefix), await limiter(createMetrics(), prefix)];
    const until = clock.ms + 30_000;
    const first = await a.firstMark('refusals:key:x:minute:1', until);
    assert.equal(first, clock.ms);
    const saved = clock.ms;
    clock.ms += 700;
    try {
      assert.equal(await b.firstMark('refusals:key:x:minute:1', until), first, 'b finds the mark a made');
      assert.equal(await b.firstMark('refusals:key:x:minute:2', until), clock.ms, 'another period has its own');
    } finally {
      clock.ms = saved;
    }
    const limits = limitsOf(10, 100);
    await admitted(a, 'key:counts', limits, 3);
    const seen = await b.consume('key:counts', limits);
    assert.deepEqual(
      seen.windows.map((w) => w.remaining),
      [6, 96],
    );
    assert.deepEqual(
      (await b.peek('key:counts', limits)).windows.map((w) => w.remaining),
      [6, 96],
      'a look counts nothing',
    );
  });

  test("a busy key's block that no request comes back for is handed back within a second or two, by the limiter itself", async () => {
    const prefix = newKeyPrefix();
    const l = await limiter(createMetrics(), prefix);
    const limits = limitsOf(2_000_000, 100_000_000);
    await admitted(l, 'key:left', limits, 40);
    const counted = async () => await countedIn(admin, `${prefix}:{key:left}:minute:by-instance`);
    assert.ok((await counted()) > 40, 'a block is held');
    const saved = clock.ms;
    try {
      // The limiter's sweep reads the clock: it moves on past the block's lifetime, as real time would.
      clock.ms += 1500;
      await eventually(async () => (await counted()) === 40, 5_000, 100);
    } finally {
      clock.ms = saved;
    }
  });

  test('a Redis restarted empty is brought back up to what the instances saw: no fresh day, and at most N days across N instances', async () => {
    const [metricsA, metricsB] = [createMetrics(), createMetrics()];
    const prefix = newKeyPrefix();
    const a = await limiter(metricsA, prefix);
    const b = await limiter(metricsB, prefix);
    const limits = limitsOf(100, 5);
    assert.equal(await admitted(a, 'key:restart', limits, 5), 5);
    assert.equal(await admitted(b, 'key:other', limits, 1), 1, 'b talks to Redis too');

    await redis.kill(); // it keeps nothing on disk: it comes back empty
    // During the outage each instance decides alone: a from the 5 it saw, b (which never saw the
    // key) from nothing: the documented bound, N times the limit across N instances.
    assert.equal(await admitted(a, 'key:restart', limits, 5), 0);
    assert.equal(await admitted(b, 'key:restart', limits, 10), 5);

    redis = await startRedis(dir, 'faults', REDIS_LINES, false, redis.port);
    await eventually(async () => (await degraded(metricsA)) === 0 && (await degraded(metricsB)) === 0, 10_000, 100);
    const day = await countedIn(admin, `${prefix}:{key:restart}:day:by-instance`);
    assert.ok(day >= 5, `Redis came back empty and was brought up to ${day}, not to the 5 spent`);
    // A third instance that saw nothing of it finds the day spent.
    const c = await limiter(createMetrics(), prefix);
    assert.equal(await admitted(c, 'key:restart', limits, 3), 0);
    assert.equal(await admitted(a, 'key:restart', limits, 3), 0);
    assert.equal(await admitted(b, 'key:restart', limits, 3), 0);
  });

  /** Redis hung (SIGSTOP, until the test ends or sends SIGCONT), then a limiter started on it whose wall clock is offsetMs off. */
  function startedWhileHung(t: TestContext, url: string, prefix: string, offsetMs: number) {
    redis.child.kill('SIGSTOP');
    atEnd(t, () => void redis.child.kill('SIGCONT'));
    const metrics = createMetrics();
    const limiter = new RedisRateLimiter({
      urls: [url],
      keyPrefix: prefix,
      log: createLogger('silent'),
      metrics,
      clock: { now: () => Date.now() + offsetMs, elapsed: () => performance.now() },
    });
    atEnd(t, () => limiter.close());
    return { limiter, metrics };
  }

  test("an instance whose clock is ahead, cut off before it ever heard from Redis: what it admitted counts in Redis's window, never a later one", async (t) => {
    const url = `redis://127.0.0.1:${redis.port}`;
    const prefix = newKeyPrefix();
    const limits = limitsOf(60, 100_000);
    // Enough of the real minute left for the whole case, and the instance's clock already in the next one.
    while (MINUTE_MS - (Date.now() % MINUTE_MS) < 15_000) await sleep(250);
    const aheadMs = MINUTE_MS - (Date.now() % MINUTE_MS) + 2_000;
    const onTime = await createTestRedisLimiter({ url, keyPrefix: prefix, owner: suite }); // Redis's own clock
    assert.equal(await admitted(onTime, 'key:ahead', limits, 60), 60);
    const { limiter: ahead, metrics } = startedWhileHung(t, url, prefix, aheadMs);
    // Its own minute, the next one by its clock, from nothing: the documented bound of N limits.
    assert.equal(await admitted(ahead, 'key:ahead', limits, 70), 60);
    assert.equal(await degraded(metrics), 1);
    redis.child.kill('SIGCONT');
    await eventually(async () => (await degraded(metrics)) === 0, 10_000, 100);
    const [seconds, micros] = (await admin.time()) as [number, number];
    const offset = ahead.now() - (seconds * 1000 + micros / 1000);
    assert.ok(Math.abs(offset) < 500, `before any decision, its clock is Redis's (read by TIME), ${Math.round(offset)} ms off`);
    const start = await admin.hget(windowKey(prefix, 'key:ahead', 'minute'), 's');
    const count = await countedIn(admin, windowKey(prefix, 'key:ahead', 'minute'));
    const [redisSeconds] = (await admin.time()) as [number, number];
    assert.equal(Number(start), redisSeconds * 1000 - ((redisSeconds * 1000) % MINUTE_MS), "the counter stays in Redis's minute");
    assert.equal(Number(count), 120);
    assert.equal(await admitted(onTime, 'key:ahead', limits, 5), 0, "Redis's minute stays spent: no fresh count from the raise");
    assert.equal(await admitted(ahead, 'key:ahead', limits, 5), 0);
  });

  test("an instance whose clock is behind, cut off before it ever heard from Redis: what it admitted counts in Redis's window, not in one Redis has left", async (t) => {
    const url = `redis://127.0.0.1:${redis.port}`;
    const prefix = newKeyPrefix();
    const limits = limitsOf(60, 100_000);
    // Enough of the real minute left for the whole case, and the instance's clock 30 s into the minute before.
    while (MINUTE_MS - (Date.now() % MINUTE_MS) < 15_000) await sleep(250);
    const behindMs = (Date.now() % MINUTE_MS) + 30_000;
    const onTime = await createTestRedisLimiter({ url, keyPrefix: prefix, owner: suite });
    assert.equal(await admitted(onTime, 'key:behind', limits, 30), 30);
    const { limiter: behind, metrics } = startedWhileHung(t, url, prefix, -behindMs);
    assert.equal(await admitted(behind, 'key:behind', limits, 70), 60, 'its own minute, the one before by its clock, from nothing');
    redis.child.kill('SIGCONT');
    await eventually(async () => (await degraded(metrics)) === 0, 10_000, 100);
    const [redisSeconds] = (await admin.time()) as [number, number];
    assert.equal(Number(await admin.hget(windowKey(prefix, 'key:behind', 'minute'), 's')), windowStart(redisSeconds * 1000, MINUTE_MS));
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:behind', 'minute')), 90, "its 60 are in Redis's minute");
    assert.equal(await admitted(behind, 'key:behind', limits, 5), 0, 'it admits no more in the minute it spent');
    assert.equal(await admitted(onTime, 'key:behind', limits, 5), 0);
  });

  test('what the fallback admitted is dropped with its windows: an outage with many subjects holds only the live ones', async (t) => {
    const own = new FakeClock(Date.UTC(2030, 0, 15, 11, 0, 5));
    const l = await createTestRedisLimiter({ url: `redis://127.0.0.1:${redis.port}`, keyPrefix: newKeyPrefix(), clock: own, owner: suite });
    redis.child.kill('SIGSTOP');
    atEnd(t, () => void redis.child.kill('SIGCONT'));
    const address = [{ name: 'minute', limit: 60, windowMs: MINUTE_MS }];
    for (let i = 0; i < 2_000; i++) await l.consume(`addr:10.0.${i >> 8}.${i & 255}`, address);
    assert.equal(l.fallbackSubjects, 2_000);
    own.advance(2 * MINUTE_MS);
    await l.consume('addr:10.1.0.1', address);
    assert.equal(l.fallbackSubjects, 1, 'the ended minute took its subjects with it');
    redis.child.kill('SIGCONT');
  });

  test('window counts Redis lost while this instance stayed connected (evicted, deleted) are put back from its own on its next request', async () => {
    const metrics = createMetrics();
    const prefix = newKeyPrefix();
    const lines: string[] = [];
    const l = await createTestRedisLimiter({
      url: `redis://127.0.0.1:${redis.port}`,
      keyPrefix: prefix,
      clock,
      metrics,
      log: createLogger('info', { write: (line: string) => void lines.push(line) }),
      owner: suite,
    });
    const limits = limitsOf(10, 100);
    assert.equal(await admitted(l, 'key:lost', limits, 4), 4);
    await admin.del(windowKey(prefix, 'key:lost', 'minute'), windowKey(prefix, 'key:lost', 'day'));
    // Redis counts this one as the window's first: it holds 1 for this instance, which admitted 5.
    assert.equal((await l.consume('key:lost', limits)).allowed, true);
    await eventually(
      async () => (await degraded(metrics)) === 0 && (await countedIn(admin, windowKey(prefix, 'key:lost', 'minute'))) === 5,
      5_000,
      50,
    );
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:lost', 'day')), 5);
    assert.equal(await admitted(l, 'key:lost', limits, 10), 5, 'the rest of the ten, not ten more');
    const said = lines.map((line) => JSON.parse(line) as { msg: string; level: number });
    const told = said.filter((m) => /Redis/.test(m.msg));
    assert.deepEqual(
      told.map((m) => [m.msg.replace(/:.*/s, ''), m.level]),
      [
        ['Redis holds another count for this instance than it admitted', 30],
        ['Redis reachable again', 30],
      ],
      'said at info: nothing was unreachable',
    );
  });

  test('without a timeout of its own, a request waits 250 ms for a hung Redis, then the fallback decides', async () => {
    const l = new RedisRateLimiter({
      urls: [`redis://127.0.0.1:${redis.port}`],
      keyPrefix: newKeyPrefix(),
      log: createLogger('silent'),
      metrics: createMetrics(),
      fakeClock: clock,
    });
    atEnd(suite, () => l.close());
    await l.ready();
    const limits = limitsOf(10, 100);
    await l.consume('key:default-timeout', limits);
    const stalled = stall(4);
    await sleep(50);
    const started = performance.now();
    const decision = await l.consume('key:default-timeout', limits);
    const waited = performance.now() - started;
    await stalled;
    assert.equal(decision.allowed, true);
    // The bound is the timeout plus a scheduler's slack, far from the 4 s Redis hangs.
    assert.ok(waited < 2_000, `decided after ${Math.round(waited)} ms`);
  });

  test('a Redis restarted empty gets back every subject this instance counted, more than one batch of them, and a spent day whose minute has passed', async () => {
    const metrics = createMetrics();
    const prefix = newKeyPrefix();
    const l = await limiter(metrics, prefix);
    const limits = limitsOf(100, 5);
    const many = Array.from({ length: 600 }, (_, i) => `key:many-${i}`);
    for (const subject of many) assert.equal((await l.consume(subject, limits)).allowed, true);
    assert.equal(await admitted(l, 'key:day-spent', limits, 5), 5);
    const saved = clock.ms;
    try {
      clock.ms += MINUTE_MS;
      // Refused for the day in the next minute: that minute holds nothing of it, its day all five.
      assert.equal((await l.consume('key:day-spent', limits)).allowed, false);
      await redis.kill(); // it keeps nothing on disk: it comes back empty
      redis = await startRedis(dir, 'faults', REDIS_LINES, false, redis.port);
      await eventually(async () => (await degraded(metrics)) === 0, 15_000, 100);
      for (const subject of many) assert.equal(await countedIn(admin, windowKey(prefix, subject, 'day')), 1, subject);
      assert.equal(await countedIn(admin, windowKey(prefix, 'key:day-spent', 'day')), 5);
      const fresh = await limiter(createMetrics(), prefix);
      assert.equal(await admitted(fresh, 'key:day-spent', limits, 3), 0, 'another instance finds the day spent');
    } finally {
      clock.ms = saved;
    }
  });
});
