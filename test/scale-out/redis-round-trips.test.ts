/**
 * What the shared limiter sends Redis when something goes wrong, and what an answer that came too late
 * leaves: after a slow reply only the subjects this instance admitted in memory are raised, after a lost
 * connection every subject it admitted anything for, each once, whatever requests arrive meanwhile; a
 * Redis that does not answer is asked again only after a second, whichever call found it so; and a
 * decision or a hand-back Redis ran after the instance had stopped waiting is counted once. Watched
 * through MONITOR on a redis-server of the test's own, with replies held back by a proxy (a Redis that
 * runs what it is sent and answers too late); the limiters follow one fake clock, so every decision
 * falls in one minute and one day.
 */
import assert from 'node:assert/strict';
import { before, describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import type { WindowLimit } from '../../src/limits/limiter.ts';
import { RedisRateLimiter } from '../../src/limits/redis.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { newKeyPrefix } from '../support/engines.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { degraded, fallbacks } from '../support/limiter-metrics.ts';
import { startRedis, type RedisProcess } from '../support/redis-servers.ts';
import { watchScripts, type ScriptCalls } from '../support/script-calls.ts';
import { countedIn, windowKey } from '../support/shared-counts.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';
import { atEnd, suiteOwner, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const limits: WindowLimit[] = [
  { name: 'minute', limit: 5, windowMs: MINUTE_MS },
  { name: 'day', limit: 1_000, windowMs: DAY_MS },
];
const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));
/** A busy key's limit: high enough for the limiter to take blocks of quota from Redis (maxBlock 100). */
const busy: WindowLimit[] = [{ name: 'minute', limit: 2_000_000, windowMs: MINUTE_MS }];
/** The clock put back where it was when the test ends, for a test that moves it. */
const restoreClockAfter = (t: TestContext) => {
  const saved = clock.ms;
  t.after(() => (clock.ms = saved));
};

describe('what the shared limiter sends Redis when it is slow, and what a late answer leaves', () => {
  const suite = suiteOwner();
  const dir = tempDir(suite);
  const REDIS_LINES = ['enable-debug-command yes'];
  let redis: RedisProcess;
  let admin: Redis;

  before(async () => {
    redis = await startRedis(dir, 'raises', REDIS_LINES);
    atEnd(suite, () => redis.kill());
    admin = new Redis(redis.port, '127.0.0.1', { lazyConnect: true });
    admin.on('error', () => undefined);
    atEnd(suite, () => admin.disconnect());
  });

  /**
   * An instance named `id` (each test's its own: every instance of the file sees the next test's lost
   * connection); with no blocks (maxBlock 1) each decision is one script call.
   */
  const instance = async (
    id: string,
    prefix: string,
    metrics: Metrics = createMetrics(),
    port = redis.port,
    maxBlock = 1,
    timeoutMs = 250,
  ) => {
    const l = new RedisRateLimiter({
      urls: [`redis://127.0.0.1:${port}`],
      maxBlock,
      timeoutMs,
      keyPrefix: prefix,
      instanceId: id,
      fakeClock: clock,
      log: createLogger('silent'),
      metrics,
    });
    atEnd(suite, () => l.close());
    await l.ready();
    return l;
  };
  const admitted = async (l: RedisRateLimiter, subject: string, n: number, windows = limits) => {
    let yes = 0;
    for (let i = 0; i < n; i++) if ((await l.consume(subject, windows)).allowed) yes++;
    return yes;
  };
  /** b spends key:spent's minute; a is refused it, so a holds Redis's count of it and none of its own. */
  const spentByAnother = async (a: RedisRateLimiter, b: RedisRateLimiter) => {
    assert.equal(await admitted(b, 'key:spent', 5), 5);
    assert.equal(await admitted(a, 'key:spent', 1), 0);
  };

  test('after a slow reply, each subject admitted in memory is raised once, though requests keep asking meanwhile; no other is', async (t) => {
    const calls: ScriptCalls = await watchScripts(redis.port);
    t.after(() => calls.stop());
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const [a, b] = [await instance('a1', prefix, metrics), await instance('b1', prefix)];
    await spentByAnother(a, b);
    assert.equal(await admitted(a, 'key:before', 2), 2);
    const asleep = admin.call('DEBUG', 'SLEEP', '0.8');
    await sleep(50);
    assert.equal(await admitted(a, 'key:during', 3), 3, 'decided in memory');
    assert.equal(await degraded(metrics), 1);
    // Requests keep asking while Redis is brought up to date: none starts a second bringing up to date.
    let asking = true;
    const ask = (async () => {
      while (asking) {
        await a.consume('key:asking', limits);
        await sleep(5);
      }
    })();
    try {
      await asleep;
      await eventually(async () => (await degraded(metrics)) === 0, 5_000, 20);
    } finally {
      asking = false;
      await ask;
    }
    await sleep(100);
    assert.equal(calls.count('raise', { subject: 'key:during', instance: 'a1' }), 1, 'what it admitted in memory, once');
    assert.equal(calls.count('raise', { subject: 'key:before', instance: 'a1' }), 0, 'Redis holds it right already');
    assert.equal(calls.count('raise', { subject: 'key:spent', instance: 'a1' }), 0, 'a admitted none of it');
    assert.equal(calls.count('raise', { instance: 'b1' }), 0, 'b was never cut off');
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:during', 'minute')), 3);
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:before', 'minute')), 2);
  });

  test('after a lost connection, every subject the instance admitted anything for is raised once, more than one batch of them; none it only saw refused', async (t) => {
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const [a, b] = [await instance('a2', prefix, metrics), await instance('b2', prefix)];
    await spentByAnother(a, b);
    const many = Array.from({ length: 520 }, (_, i) => `key:many-${i}`);
    for (const subject of many) assert.equal(await admitted(a, subject, 1), 1);
    const calls = await watchScripts(redis.port);
    t.after(() => calls.stop());
    // A restart as the instances see it (their connections dropped, Redis empty), with MONITOR watching on.
    await admin.flushall();
    const own = String(await admin.client('ID'));
    for (const line of String(await admin.client('LIST'))
      .trim()
      .split('\n')) {
      const [, id, flags] = /^id=(\d+) .* flags=(\S+)/.exec(line)!;
      if (id !== own && !flags!.includes('O')) await admin.client('KILL', 'ID', id!); // O: a MONITOR's
    }
    await eventually(async () => calls.count('raise', { instance: 'a2' }) >= many.length && (await degraded(metrics)) === 0, 15_000, 50);
    await sleep(200); // a second raise of any of them would have run by now
    const raisedOnce = many.filter((subject) => calls.count('raise', { subject, instance: 'a2' }) === 1);
    assert.equal(raisedOnce.length, many.length, 'each of its subjects once');
    assert.equal(calls.count('raise', { subject: 'key:spent', instance: 'a2' }), 0, 'not one it admitted nothing for');
    assert.equal(calls.count('raise', { subject: 'key:spent', instance: 'b2' }), 1, 'b raises the 5 it admitted');
    assert.equal(calls.count('raise', { instance: 'a2' }), many.length);
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:spent', 'minute')), 5);
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:many-7', 'day')), 1);
  });

  /** An instance behind a proxy of its own, which the test holds Redis's answers back in. */
  const behindProxy = async (t: TestContext, id: string, prefix: string, metrics: Metrics, maxBlock = 1, timeoutMs = 250) => {
    const proxy = await TcpProxy.start('127.0.0.1', redis.port);
    t.after(() => proxy.close());
    return { proxy, l: await instance(id, prefix, metrics, proxy.port, maxBlock, timeoutMs) };
  };
  /** Redis runs what it is sent, and its answers wait in the proxy until `release`: each call times out. */
  const hung = (t: TestContext, proxy: TcpProxy) => {
    proxy.hold('replies');
    t.after(() => proxy.release('replies'));
  };

  for (const finder of ['a decision', "a refusal's mark", 'a hand-back'] as const) {
    test(`a Redis that does not answer ${finder} is left alone for a second: what follows is decided in memory without asking it`, async (t) => {
      const calls = await watchScripts(redis.port);
      t.after(() => calls.stop());
      const prefix = newKeyPrefix();
      const metrics = createMetrics();
      const { proxy, l } = await behindProxy(t, `alone-${finder.length}`, prefix, metrics, 100);
      assert.equal(await admitted(l, 'key:alone', 2), 2);
      if (finder === 'a hand-back') assert.equal(await admitted(l, 'key:busy', 40, busy), 40, 'a block is held');
      hung(t, proxy);
      if (finder === 'a decision') assert.equal((await l.consume('key:alone', limits)).allowed, true);
      if (finder === "a refusal's mark") assert.equal(await l.firstMark('mark:alone', clock.ms + 30_000), clock.ms);
      if (finder === 'a hand-back') {
        restoreClockAfter(t);
        clock.ms += 1_500; // past the block's lifetime: the limiter's sweep hands its rest back
        await eventually(async () => calls.count('handBack', { subject: 'key:busy' }) === 1, 5_000, 20);
        await sleep(400); // past the 250 ms its answer is waited for
      }
      await sleep(200); // a moment later, within the second
      const [decided, marked, raised] = [calls.count('decide'), calls.count('mark'), calls.count('raise')];
      const inMemory = await fallbacks(metrics);
      assert.equal(await admitted(l, 'key:alone', 2), 2);
      assert.equal(await l.firstMark('mark:alone-2', clock.ms + 30_000), clock.ms);
      await sleep(100); // what was sent has reached Redis, and MONITOR has told
      assert.equal(calls.count('decide'), decided, 'no decision sent');
      assert.equal(calls.count('mark'), marked, 'no mark sent');
      assert.equal(calls.count('raise'), raised, 'nor a raise of what it admitted meanwhile');
      assert.equal((await fallbacks(metrics)) - inMemory, 3, 'both decisions and the mark taken in memory');
      proxy.release('replies');
      await eventually(async () => (await degraded(metrics)) === 0, 5_000, 20);
    });
  }

  test('a decision whose answer came too late, admitted in memory too: once Redis is back it holds that admission once', async (t) => {
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const { proxy, l } = await behindProxy(t, 'late-decision', prefix, metrics);
    assert.equal(await admitted(l, 'key:late', 3), 3);
    hung(t, proxy);
    assert.equal(await admitted(l, 'key:late', 1), 1, 'decided in memory after the timeout; Redis ran it too');
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:late', 'minute')), 4);
    proxy.release('replies');
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 20);
    await sleep(100);
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:late', 'minute')), 4);
    assert.equal(await admitted(l, 'key:late', 5), 1, 'the minute has the one left of its five');
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:late', 'day')), 5);
  });

  test('a hand-back whose answer came too late: Redis took the block back, and the instance counts only what it admitted', async (t) => {
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const calls = await watchScripts(redis.port);
    t.after(() => calls.stop());
    const { proxy, l } = await behindProxy(t, 'late-hand-back', prefix, metrics, 100);
    const minute = windowKey(prefix, 'key:block', 'minute');
    assert.equal(await admitted(l, 'key:block', 40, busy), 40);
    assert.ok((await countedIn(admin, minute)) > 40, 'a block is held');
    hung(t, proxy);
    restoreClockAfter(t);
    clock.ms += 1_500;
    await eventually(async () => calls.count('handBack', { subject: 'key:block' }) === 1, 5_000, 20);
    assert.equal(await countedIn(admin, minute), 40, 'Redis ran it');
    await sleep(400); // its answer waited for in vain
    proxy.release('replies');
    await sleep(1_100); // Redis is asked again
    // The next request takes a block again; handed back in turn, the minute holds what was admitted.
    assert.equal(await admitted(l, 'key:block', 1, busy), 1);
    clock.ms += 1_500;
    await eventually(async () => (await countedIn(admin, minute)) === 41 && (await degraded(metrics)) === 0, 5_000, 20);
    await sleep(1_100); // a sweep or two more: nothing moves it
    assert.equal(await countedIn(admin, minute), 41);
  });

  test('a hand-back Redis refused (out of memory): the next raise puts the block back, with no request for its key', async (t) => {
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const calls = await watchScripts(redis.port);
    t.after(() => calls.stop());
    const l = await instance('refused-hand-back', prefix, metrics, redis.port, 100);
    const minute = windowKey(prefix, 'key:refused', 'minute');
    assert.equal(await admitted(l, 'key:refused', 40, busy), 40);
    const held = await countedIn(admin, minute);
    assert.ok(held > 40, 'a block is held');
    await admin.config('SET', 'maxmemory', '1'); // every write refused: OOM
    t.after(() => admin.config('SET', 'maxmemory', '0'));
    restoreClockAfter(t);
    clock.ms += 1_500;
    await eventually(async () => calls.count('handBack', { subject: 'key:refused' }) === 1, 5_000, 20);
    await sleep(100);
    assert.equal(await countedIn(admin, minute), held, 'Redis kept the block');
    // Another key's decision is refused too: the instance decides in memory until Redis takes writes again.
    assert.equal(await admitted(l, 'key:other', 1), 1);
    assert.equal(await degraded(metrics), 1);
    await admin.config('SET', 'maxmemory', '0');
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 20);
    assert.equal(await countedIn(admin, minute), 40, 'what it admitted, raised');
  });

  test('an answer that disagrees while another decision is on its way: Redis is brought up to date once, after that answer too', async (t) => {
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const calls = await watchScripts(redis.port);
    t.after(() => calls.stop());
    // A timeout long enough that neither decision is given up on while the test holds its answer.
    const { proxy, l } = await behindProxy(t, 'in-flight', prefix, metrics, 1, 5_000);
    const wide: WindowLimit[] = [{ name: 'minute', limit: 100, windowMs: MINUTE_MS }];
    const minute = windowKey(prefix, 'key:flight', 'minute');
    assert.equal(await l.firstMark('mark:flight', clock.ms + 30_000), clock.ms, 'a mark answered leaves nothing in flight');
    assert.equal(await admitted(l, 'key:flight', 4, wide), 4);
    await admin.del(minute); // lost by Redis: the next answer holds 1 for this instance, which admitted 5
    hung(t, proxy);
    const decided = (n: number) => eventually(async () => calls.count('decide', { subject: 'key:flight' }) === n, 2_000, 2);
    const first = l.consume('key:flight', wide);
    await decided(5);
    // The client sends one batch at a time (auto-pipelining): this one leaves when the first is answered.
    const second = l.consume('key:flight', wide);
    proxy.releaseOne('replies'); // the first answer alone: it disagrees, and Redis is to be brought up to date
    await decided(6); // the second run by Redis, its answer held
    await sleep(30);
    proxy.release('replies');
    assert.deepEqual([(await first).allowed, (await second).allowed], [true, true]);
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 20);
    await sleep(100);
    assert.equal(calls.count('raise', { subject: 'key:flight' }), 1, 'one raise, sent once both answers were in');
    assert.equal(await countedIn(admin, minute), 6);
  });

  test('what was admitted while Redis was brought up to date, refused when raised (out of memory): raised again a second later, with no request for its key', async (t) => {
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const calls = await watchScripts(redis.port);
    t.after(() => calls.stop());
    const { proxy, l } = await behindProxy(t, 'refused-raise', prefix, metrics);
    assert.equal(await admitted(l, 'key:x', 1), 1);
    hung(t, proxy);
    assert.equal(await admitted(l, 'key:x', 1), 1, 'in memory, after the timeout');
    // A second later Redis is brought up to date: key:x's raise, whose answer the proxy holds.
    await eventually(async () => calls.count('raise', { subject: 'key:x' }) === 1, 5_000, 10);
    assert.equal(await admitted(l, 'key:y', 1), 1, 'in memory, while that raise is on its way');
    await admin.config('SET', 'maxmemory', '1'); // key:y's raise, sent once key:x's is answered, is refused
    t.after(() => admin.config('SET', 'maxmemory', '0'));
    proxy.release('replies');
    await eventually(async () => calls.count('raise', { subject: 'key:y' }) === 1, 5_000, 10);
    await sleep(100);
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:y', 'minute')), 0, 'refused');
    assert.equal(await degraded(metrics), 1, 'back to memory');
    await admin.config('SET', 'maxmemory', '0');
    await eventually(async () => (await countedIn(admin, windowKey(prefix, 'key:y', 'minute'))) === 1, 5_000, 20);
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 20);
    assert.equal(await countedIn(admin, windowKey(prefix, 'key:x', 'minute')), 2);
  });

  test('a decision Redis admitted after the instance gave up on it, while its fallback refused it: once back, Redis holds what was admitted', async (t) => {
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const { proxy, l } = await behindProxy(t, 'refused-in-memory', prefix, metrics);
    const minute = windowKey(prefix, 'key:spent', 'minute');
    assert.equal(await admitted(l, 'key:spent', 5), 5);
    await admin.del(minute); // Redis loses the minute: the next decision finds it fresh
    hung(t, proxy);
    assert.equal(await admitted(l, 'key:spent', 1), 0, 'refused in memory: its minute is spent');
    assert.equal(await countedIn(admin, minute), 1, 'admitted by Redis, whose answer came too late');
    proxy.release('replies');
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 20);
    await eventually(async () => (await countedIn(admin, minute)) === 5, 5_000, 20);
  });

  test("a block's rest handed back while Redis is not deciding is kept in memory, not sent, and Redis gets it with the next raise", async (t) => {
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const calls = await watchScripts(redis.port);
    t.after(() => calls.stop());
    const { proxy, l } = await behindProxy(t, 'hand-back-in-memory', prefix, metrics, 100);
    const minute = windowKey(prefix, 'key:kept', 'minute');
    assert.equal(await admitted(l, 'key:kept', 40, busy), 40);
    assert.ok((await countedIn(admin, minute)) > 40, 'a block is held');
    hung(t, proxy);
    assert.equal(await admitted(l, 'key:other', 1), 1, 'decided in memory: Redis is not deciding now');
    restoreClockAfter(t);
    clock.ms += 1_500; // past the block's lifetime: the limiter's sweep (once a second) hands its rest back
    await sleep(1_300);
    assert.equal(calls.count('handBack', { subject: 'key:kept' }), 0, 'not sent to a Redis that does not decide');
    proxy.release('replies');
    await eventually(async () => (await degraded(metrics)) === 0 && (await countedIn(admin, minute)) === 40, 5_000, 20);
  });

  test("an instance on its own clocks that has heard Redis, cut off and back: its raise holds what it admitted, not the others' counts too", async (t) => {
    while (MINUTE_MS - (Date.now() % MINUTE_MS) < 15_000) await sleep(250); // one real minute for the whole case
    const prefix = newKeyPrefix();
    const metrics = createMetrics();
    const proxy = await TcpProxy.start('127.0.0.1', redis.port);
    t.after(() => proxy.close());
    const onOwnClocks = (id: string, port: number, m: Metrics) => {
      const l = new RedisRateLimiter({
        urls: [`redis://127.0.0.1:${port}`],
        keyPrefix: prefix,
        instanceId: id,
        log: createLogger('silent'),
        metrics: m,
      });
      atEnd(suite, () => l.close());
      return l;
    };
    const [a, b] = [onOwnClocks('own-clock-a', proxy.port, metrics), onOwnClocks('own-clock-b', redis.port, createMetrics())];
    await Promise.all([a.ready(), b.ready()]);
    const wide: WindowLimit[] = [{ name: 'minute', limit: 100, windowMs: MINUTE_MS }];
    assert.equal(await admitted(b, 'key:real', 3, wide), 3);
    assert.equal(await admitted(a, 'key:real', 2, wide), 2);
    hung(t, proxy);
    assert.equal(await admitted(a, 'key:real', 1, wide), 1, 'in memory; Redis ran it too');
    proxy.release('replies');
    await eventually(async () => (await degraded(metrics)) === 0, 5_000, 20);
    const minute = windowKey(prefix, 'key:real', 'minute');
    assert.equal(Number(await admin.hget(minute, 'own-clock-a')), 3);
    assert.equal(await countedIn(admin, minute), 6);
  });

  test('an instance that has heard Redis, cut off as a minute turns: the new minute starts from nothing in memory', async (t) => {
    restoreClockAfter(t);
    clock.ms = Date.UTC(2030, 0, 15, 10, 30, 50);
    const { proxy, l } = await behindProxy(t, 'minute-turns', newKeyPrefix(), createMetrics());
    assert.equal(await admitted(l, 'key:turn', 5), 5);
    hung(t, proxy);
    assert.equal(await admitted(l, 'key:turn', 1), 0, 'its minute spent, in memory too');
    clock.ms = Date.UTC(2030, 0, 15, 10, 31, 5);
    assert.equal(await admitted(l, 'key:turn', 6), 5, 'the next minute, decided in memory');
  });
});
