/**
 * The shared limiter (docs/scale-out.md): every window of a request checked and counted by one Lua script on
 * Redis's clock, a subject's keys hash-tagged into one Cluster slot. While Redis is slow or down, a fallback in
 * memory that holds the counts Redis last gave decides; Redis is brought up to date before it decides again.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Metrics } from '../metrics.ts';
import { systemClock, type Clock } from '../domain/clock.ts';
import { decisionOf, windowStart, type LimitDecision, type RateLimiter, type WindowLimit } from './limiter.ts';
import { MemoryRateLimiter, type Counter } from './memory.ts';
import { QuotaBlocks } from './quota-blocks.ts';
import { connectRedis, type RedisClient } from './redis-client.ts';

/** Redis's clock in epoch ms; or ARGV[1] when it is not 0 (a test's fake clock). */
const NOW = `local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;

/** How long a counter outlives its window (by Redis's clock), so that an instance a little behind it still finds it. */
const COUNTER_MARGIN_MS = 5000;

// KEYS: a hash per window of its start (s) and count (c). ARGV: the test's clock (0: Redis's), 1 to count or
// 0 to look, the block wanted (1: this request alone), then limit and length per window. A larger block is
// granted only while every window has BLOCK_HEADROOM blocks left, so a window's last quota goes one by one.
// Returns { requests counted (0: refused or looked only), now, count of window 1, count of window 2, ... }.
const BLOCK_HEADROOM = 10;
const SCRIPT = `${NOW}
local counts, starts = {}, {}
local admitted = true
local size = tonumber(ARGV[3])
for i, key in ipairs(KEYS) do
  local limit, length = tonumber(ARGV[i * 2 + 2]), tonumber(ARGV[i * 2 + 3])
  starts[i] = now - now % length
  local stored = redis.call('HMGET', key, 's', 'c')
  counts[i] = 0
  if tonumber(stored[1]) == starts[i] then counts[i] = tonumber(stored[2]) end
  if counts[i] >= limit then admitted = false end
  if size > 1 and limit - counts[i] < size * ${BLOCK_HEADROOM} then size = 1 end
end
if not admitted or ARGV[2] ~= '1' then size = 0 end
if size > 0 then
  for i, key in ipairs(KEYS) do
    counts[i] = counts[i] + size
    redis.call('HSET', key, 's', starts[i], 'c', counts[i])
    redis.call('PEXPIRE', key, starts[i] + tonumber(ARGV[i * 2 + 3]) + ${COUNTER_MARGIN_MS} - now)
  end
end
local reply = {size, now}
for i = 1, #counts do reply[i + 2] = counts[i] end
return reply`;

// KEYS: the counters a block was counted in. ARGV[1]: its unspent requests; ARGV[i + 1]: the start of
// the window KEYS[i] counted it in. Each counter still in that window gets them back; one that has
// moved on to a new window (or expired) keeps its count.
const UNSPENT_SCRIPT = `
for i, key in ipairs(KEYS) do
  if tonumber(redis.call('HGET', key, 's')) == tonumber(ARGV[i + 1]) then redis.call('HINCRBY', key, 'c', -tonumber(ARGV[1])) end
end
return 0`;

// KEYS: a subject's counters. ARGV[1]: the test's clock (0: Redis's); then per window: start, length, floor (this
// instance's count: what Redis last gave it plus what it admitted without Redis) and added (what it admitted
// without Redis). Windows are Redis's: what an instance counted in its current window, or in one ahead of it
// (its clock is ahead), goes into Redis's current window, which gets `added` and at least `floor` (a counter of
// an earlier window, or none: a Redis restarted empty, becomes `floor`). A window that has ended by Redis's
// clock is left alone. So a raise never moves a counter to a later window than Redis's own.
const RAISE_SCRIPT = `${NOW}
for i, key in ipairs(KEYS) do
  local start, length = tonumber(ARGV[i * 4 - 2]), tonumber(ARGV[i * 4 - 1])
  local floor, added = tonumber(ARGV[i * 4]), tonumber(ARGV[i * 4 + 1])
  local current = now - now % length
  if start >= current then
    local stored = redis.call('HMGET', key, 's', 'c')
    local s = tonumber(stored[1])
    if s == current then
      redis.call('HSET', key, 'c', math.max(tonumber(stored[2]) + added, floor))
    elseif (s == nil or s < current) and floor > 0 then
      redis.call('HSET', key, 's', current, 'c', floor)
      redis.call('PEXPIRE', key, current + length + ${COUNTER_MARGIN_MS} - now)
    end
  end
end
return 0`;

// KEYS[1]: the mark. ARGV: the test's clock (0: Redis's), the end of the mark's period (epoch ms).
// Returns { the first mark of the period (now when this is it), now }.
const MARK_SCRIPT = `${NOW}
local first = redis.call('GET', KEYS[1])
if first then return {tonumber(first), now} end
local ttl = tonumber(ARGV[2]) - now
if ttl > 0 then redis.call('SET', KEYS[1], now, 'PX', ttl) end
return {now, now}`;

export interface RedisLimiterOptions {
  /** A single Redis's URL, or the seed nodes of a cluster when `cluster` is set. */
  urls: readonly string[];
  cluster?: boolean;
  /** Certificate authorities (PEM) for `rediss://`. */
  tlsCa?: Buffer;
  /** Namespace of every key, so that several deployments (or test runs) can share one Redis. */
  keyPrefix?: string;
  /** The longest a request waits for Redis before the in-memory fallback decides. */
  timeoutMs?: number;
  /** The largest block of a busy key's quota taken at once (quota-blocks.ts); 1: every request asks Redis. */
  maxBlock?: number;
  /** A fake clock for tests, which then replaces Redis's own in every script and the monotonic one; the service leaves it unset. */
  fakeClock?: Clock;
  /** This instance's own clocks (the system's by default): its wall clock until Redis first answers, and the monotonic one. */
  clock?: Clock;
  log: FastifyBaseLogger;
  metrics: Metrics;
}

type Args = (string | number)[];
type LimiterRedis = RedisClient & {
  petstoreLimit: (numKeys: number, ...args: Args) => Promise<number[]>;
  petstoreMark: (numKeys: number, ...args: Args) => Promise<number[]>;
  petstoreUnspent: (numKeys: number, ...args: Args) => Promise<number>;
  petstoreRaise: (numKeys: number, ...args: Args) => Promise<number>;
};

/** How many subjects' counters are raised at once when Redis is brought up to date. */
const RAISE_BATCH = 500;

/** How long a block of quota may be spent from before its rest is handed back. */
const BLOCK_LIFETIME_MS = 1000;

export class RedisRateLimiter implements RateLimiter {
  readonly #redis: LimiterRedis;
  /**
   * Decides while Redis cannot, from the counts Redis last gave for each subject; it keeps what it admitted
   * meanwhile (Counter.unshared) until Redis has it, and forgets it with its window.
   */
  readonly #fallback: MemoryRateLimiter;
  readonly #blocks: QuotaBlocks;
  readonly #blockSweep: NodeJS.Timeout;
  /** Requests admitted from blocks since the metric was last told. */
  #preadmitted = 0;
  /** Per subject, the call to Redis for its next block while one is on its way. */
  readonly #refills = new Map<string, Promise<LimitDecision>>();
  /** Each limits array's block cap (see #capOf). */
  readonly #caps = new WeakMap<readonly WindowLimit[], number>();
  /** Hand-backs and late raises on their way, which close() lets finish. */
  readonly #handingBack = new Set<Promise<unknown>>();
  readonly #prefix: string;
  readonly #fakeClock: Clock | undefined;
  readonly #local: Clock;
  readonly #log: FastifyBaseLogger;
  readonly #metrics: Metrics;
  /** Redis's clock as last read, and the monotonic clock's reading then. */
  #redisClock: { ms: number; at: number } | undefined;
  /** Since a failure, or a lost connection, until every counter this instance knows is back in Redis. */
  #degraded = false;
  /** Set by a lost connection: Redis may have restarted empty, so every counter known is raised. */
  #countsMayBeLost = false;
  /** The bringing of Redis up to date, while it runs. */
  #syncing: Promise<void> | undefined;
  #closing = false;
  /** The last connection error ioredis reported, for the start-up check's message. */
  #lastError: Error | undefined;
  /** After a failure Redis is left alone briefly, so a hung Redis costs one timeout per second, not per request. */
  #retryAtMs = 0;
  #retryTimer: NodeJS.Timeout | undefined;

  constructor(options: RedisLimiterOptions) {
    this.#prefix = options.keyPrefix ?? 'petstore';
    this.#fakeClock = options.fakeClock;
    this.#local = options.clock ?? systemClock;
    this.#fallback = new MemoryRateLimiter({
      clock: { now: () => this.now(), elapsed: () => this.#elapsed() },
      // Until Redis first answers, this instance knows only its own clock, which may be off from Redis's.
      unanchored: () => this.#redisClock === undefined && this.#fakeClock === undefined,
    });
    this.#log = options.log;
    this.#metrics = options.metrics;
    this.#redis = connectRedis({
      urls: options.urls,
      cluster: options.cluster ?? false,
      tlsCa: options.tlsCa,
      timeoutMs: options.timeoutMs ?? 250,
    }) as LimiterRedis;
    this.#redis.defineCommand('petstoreLimit', { lua: SCRIPT });
    this.#redis.defineCommand('petstoreMark', { lua: MARK_SCRIPT });
    this.#redis.defineCommand('petstoreUnspent', { lua: UNSPENT_SCRIPT });
    this.#redis.defineCommand('petstoreRaise', { lua: RAISE_SCRIPT });
    this.#blocks = new QuotaBlocks({
      maxSize: options.maxBlock ?? 1,
      lifetimeMs: BLOCK_LIFETIME_MS,
      onUnspent: (block, unspent) => this.#handBack(block.counters, block.starts, unspent),
    });
    // Unspent requests of blocks no request came back for are handed back within a lifetime or two.
    this.#blockSweep = setInterval(() => {
      this.#blocks.sweep(this.now());
      this.#countPreadmitted();
    }, BLOCK_LIFETIME_MS).unref();
    // Reported through #degrade on the request path, and by reachableWithin at start.
    this.#redis.on('error', (err: Error) => (this.#lastError = err));
    // A lost connection may come back to a Redis restarted empty: it is brought up to date first,
    // as soon as it is back rather than at the next request.
    this.#redis.on('close', () => {
      if (this.#closing) return;
      this.#countsMayBeLost = true;
      this.#degrade(undefined);
    });
    this.#redis.on('ready', () => this.#bringBack());
  }

  /** Redis's clock as last read, carried forward by the monotonic clock; the instance's before Redis ever answered. */
  now(): number {
    if (this.#fakeClock) return this.#fakeClock.now();
    const clock = this.#redisClock;
    return clock ? clock.ms + Math.floor(this.#local.elapsed() - clock.at) : this.#local.now();
  }

  #elapsed(): number {
    return (this.#fakeClock ?? this.#local).elapsed();
  }

  /** What the scripts take as their clock: 0 for Redis's own. */
  #scriptClock(): number {
    return this.#fakeClock?.now() ?? 0;
  }

  /** How many subjects the fallback holds counts for: what this limiter's memory grows with during an outage, bounded by their windows. */
  get fallbackSubjects(): number {
    return this.#fallback.size;
  }

  /** Resolves once connected (or rejects), for start-up and tests; requests never wait for it. */
  async ready(): Promise<void> {
    if (this.#redis.status === 'ready') return;
    await new Promise<void>((resolve, reject) => {
      this.#redis.once('ready', resolve);
      this.#redis.once('end', () => reject(new Error('Redis connection ended')));
    });
  }

  /**
   * For the start-up check: undefined once connected within withinMs, else why not (the first
   * connection error, or the wait running out). Requests never wait for this; ioredis keeps
   * reconnecting whatever it answers.
   */
  async reachableWithin(withinMs: number): Promise<string | undefined> {
    if (this.#redis.status === 'ready') return undefined;
    if (this.#lastError) return this.#lastError.message;
    let timer: NodeJS.Timeout | undefined;
    let onReady: (() => void) | undefined;
    let onError: ((err: Error) => void) | undefined;
    try {
      return await new Promise<string | undefined>((resolve) => {
        onReady = () => resolve(undefined);
        onError = (err) => resolve(err.message || (err as NodeJS.ErrnoException).code || 'connection failed');
        this.#redis.once('ready', onReady);
        this.#redis.once('error', onError);
        timer = setTimeout(() => resolve(this.#lastError?.message ?? `no answer within ${withinMs} ms`), withinMs);
      });
    } finally {
      clearTimeout(timer);
      if (onReady) this.#redis.off('ready', onReady);
      if (onError) this.#redis.off('error', onError);
    }
  }

  consume(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision> {
    const cap = this.#capOf(limits);
    if (cap <= 1) return this.#decide(subject, limits, true);
    const nowMs = this.now();
    const starts = limits.map((w) => windowStart(nowMs, w.windowMs));
    const preadmitted = this.#spendBlock(subject, limits, starts, nowMs);
    return preadmitted ? Promise.resolve(preadmitted) : this.#consumeFromBlock(subject, limits, starts, nowMs, cap);
  }

  /** Only a request pre-admitted from a block this instance holds is decided at once; every other asks Redis. */
  consumeNow(subject: string, limits: readonly WindowLimit[]): LimitDecision | undefined {
    if (this.#capOf(limits) <= 1) return undefined;
    const nowMs = this.now();
    return this.#spendBlock(
      subject,
      limits,
      limits.map((w) => windowStart(nowMs, w.windowMs)),
      nowMs,
    );
  }

  /**
   * The largest block a subject with these limits may take, worked out once per limits array: a
   * key's limits are one array per key record, and a request that cannot be decided at once asks
   * twice (consumeNow, then consume).
   */
  #capOf(limits: readonly WindowLimit[]): number {
    let cap = this.#caps.get(limits);
    if (cap === undefined) {
      cap = this.#blocks.capFor(limits.map((w) => w.limit));
      this.#caps.set(limits, cap);
    }
    return cap;
  }

  #spendBlock(subject: string, limits: readonly WindowLimit[], starts: readonly number[], nowMs: number): LimitDecision | undefined {
    const remaining = this.#blocks.spend(subject, starts, nowMs);
    if (!remaining) return undefined;
    this.#preadmitted++;
    return decisionOf(limits, starts, true, remaining, nowMs);
  }

  /**
   * A subject with no block left asks Redis for one, once: requests that arrive while that call is
   * on its way wait for it and spend from the block it brings, instead of each asking for its own.
   */
  async #consumeFromBlock(
    subject: string,
    limits: readonly WindowLimit[],
    starts: readonly number[],
    nowMs: number,
    cap: number,
  ): Promise<LimitDecision> {
    for (let refill = this.#refills.get(subject); refill !== undefined; refill = this.#refills.get(subject)) {
      await refill;
      const preadmitted = this.#spendBlock(subject, limits, starts, nowMs);
      if (preadmitted) return preadmitted;
    }
    const refill = this.#decide(subject, limits, true, cap);
    this.#refills.set(subject, refill);
    try {
      return await refill;
    } finally {
      if (this.#refills.get(subject) === refill) this.#refills.delete(subject);
    }
  }

  peek(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision> {
    return this.#decide(subject, limits, false);
  }

  async firstMark(subject: string, untilMs: number): Promise<number> {
    if (!this.#redisDecides()) return this.#fallbackMark(subject, untilMs, undefined);
    try {
      const [first, nowMs] = await this.#redis.petstoreMark(1, `${this.#prefix}:{${subject}}:mark`, this.#scriptClock(), untilMs);
      this.#readClock(Number(nowMs));
      return Number(first);
    } catch (err) {
      this.#leaveAlone();
      return this.#fallbackMark(subject, untilMs, err);
    }
  }

  async close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#blockSweep);
    clearTimeout(this.#retryTimer);
    this.#blocks.releaseAll();
    this.#countPreadmitted();
    // Each settles within the command timeout, so a hung Redis cannot hold the shutdown; a bringing up
    // to date first, since it may send more.
    await this.#syncing;
    await Promise.allSettled(this.#handingBack);
    this.#redis.disconnect();
    await this.#fallback.close();
  }

  /**
   * Whether Redis decides now. Not while it is unreachable or was just found so; and not before
   * what the fallback counted meanwhile is in Redis, which this starts.
   */
  #redisDecides(): boolean {
    if (this.#redis.status !== 'ready' || performance.now() < this.#retryAtMs) return false;
    if (!this.#degraded) return true;
    this.#bringBack();
    return false;
  }

  /** After a failure: Redis is left alone for a second, then brought up to date (requests or not). */
  #leaveAlone(): void {
    this.#retryAtMs = performance.now() + 1000;
    this.#retryTimer ??= setTimeout(() => {
      this.#retryTimer = undefined;
      this.#bringBack();
    }, 1000).unref();
  }

  /** Starts bringing Redis up to date when it is connected and that is owed; a failed attempt tries again after a second. */
  #bringBack(): void {
    if (!this.#degraded || this.#syncing || this.#closing || this.#redis.status !== 'ready') return;
    this.#syncing = this.#bringUpToDate().finally(() => (this.#syncing = undefined));
  }

  /** `cap`: the largest block these limits allow (QuotaBlocks.capFor), when counting; 1 asks for no block. */
  async #decide(subject: string, limits: readonly WindowLimit[], count: boolean, cap = 1): Promise<LimitDecision> {
    if (!this.#redisDecides()) return this.#fallbackDecision(subject, limits, count, undefined);
    // The {subject} hash tag keeps a subject's keys in one slot, as Redis Cluster needs for one script.
    const keys = limits.map((w) => this.#counterKey(subject, w.name));
    const args = limits.flatMap((w) => [w.limit, w.windowMs]);
    const wanted = cap > 1 ? this.#blocks.sizeFor(subject, cap) : 1;
    let reply: number[];
    try {
      reply = await this.#redis.petstoreLimit(keys.length, ...keys, this.#scriptClock(), count ? 1 : 0, wanted, ...args);
    } catch (err) {
      this.#leaveAlone();
      return this.#fallbackDecision(subject, limits, count, err);
    }
    const counted = Number(reply[0]);
    const nowMs = Number(reply[1]);
    this.#readClock(nowMs);
    const starts = limits.map((w) => windowStart(nowMs, w.windowMs));
    const countsAfter = limits.map((_, i) => Number(reply[i + 2]));
    this.#fallback.observe(subject, limits, starts, countsAfter, nowMs);
    if (counted > 0 && cap > 1) {
      const windows = { counters: keys, starts, limits: limits.map((w) => w.limit), countsAfter };
      const remaining = this.#blocks.granted(subject, counted, windows, nowMs);
      return decisionOf(limits, starts, true, remaining, nowMs);
    }
    const allowed = count ? counted > 0 : countsAfter.every((n, i) => n < limits[i]!.limit);
    return decisionOf(
      limits,
      starts,
      allowed,
      countsAfter.map((n, i) => limits[i]!.limit - n),
      nowMs,
    );
  }

  #counterKey(subject: string, window: string): string {
    return `${this.#prefix}:{${subject}}:${window}`;
  }

  /** A reply's `now` sets the clock the fallback and the blocks go by. */
  #readClock(nowMs: number): void {
    this.#redisClock = { ms: nowMs, at: this.#local.elapsed() };
  }

  /** Pre-admissions are counted in a plain number on the request path and reach the metric once a second. */
  #countPreadmitted(): void {
    if (this.#preadmitted === 0) return;
    this.#metrics.limiterPreadmitted.inc(this.#preadmitted);
    this.#preadmitted = 0;
  }

  /** Hands a block's unspent requests back; one that cannot be handed back stays counted until its window ends. */
  #handBack(counters: readonly string[], starts: readonly number[], unspent: number): void {
    if (this.#redis.status !== 'ready') return;
    this.#track(this.#redis.petstoreUnspent(counters.length, ...counters, unspent, ...starts));
  }

  /** A command sent without waiting for it, which close() lets finish. */
  #track(command: Promise<unknown>): void {
    const sent: Promise<unknown> = command.then(
      () => this.#handingBack.delete(sent),
      () => this.#handingBack.delete(sent),
    );
    this.#handingBack.add(sent);
  }

  #fallbackDecision(subject: string, limits: readonly WindowLimit[], count: boolean, err: unknown): LimitDecision {
    this.#degrade(err);
    this.#metrics.limiterFallbacks.inc();
    return this.#fallback.decide(subject, limits, this.now(), count);
  }

  #fallbackMark(subject: string, untilMs: number, err: unknown): number {
    this.#degrade(err);
    this.#metrics.limiterFallbacks.inc();
    return this.#fallback.mark(subject, this.now(), untilMs);
  }

  /**
   * Brings Redis up to what this instance knows, a batch at a time: the fallback's admissions added, lower counters
   * raised to this instance's (every live subject after a lost connection, else those it admitted to). On failure
   * it stays on the fallback and retries a second later; what it admits meanwhile is sent ahead of later calls.
   */
  async #bringUpToDate(): Promise<void> {
    const everything = this.#countsMayBeLost;
    this.#countsMayBeLost = false;
    const err = await this.#raise(everything);
    if (err !== undefined) {
      this.#countsMayBeLost ||= everything;
      this.#leaveAlone();
      this.#log.warn({ err }, 'Redis answers again but could not be brought up to date: rate limiting stays in memory for now');
      return;
    }
    // Admitted while the raise was on its way: sent without waiting, as Redis decides again.
    for (const [subject, counters] of this.#fallback.current()) {
      if (counters.some((c) => c.unshared > 0)) this.#track(this.#raiseOne(subject, counters));
    }
    this.#recover();
  }

  /** Raises subjects' counters, a batch at a time; the first failure, which stops it. */
  async #raise(everything: boolean): Promise<unknown> {
    const subjects = [...this.#fallback.current()].filter(([, counters]) => everything || counters.some((c) => c.unshared > 0));
    for (let first = 0; first < subjects.length; first += RAISE_BATCH) {
      const batch = subjects.slice(first, first + RAISE_BATCH);
      const results = await Promise.allSettled(batch.map(([subject, counters]) => this.#raiseOne(subject, counters)));
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) return failed.reason ?? new Error('raise failed');
    }
    return undefined;
  }

  /**
   * One subject's raise: its counters to at least this instance's counts, plus what it admitted without Redis;
   * once Redis has them, those admissions are no longer this instance's alone (unless its window moved on meanwhile).
   */
  async #raiseOne(subject: string, counters: readonly Counter[]): Promise<void> {
    const keys = counters.map((c) => this.#counterKey(subject, c.name));
    const sent = counters.map((c) => ({ start: c.start, unshared: c.unshared }));
    const args = counters.flatMap((c) => [c.start, c.end - c.start, c.count, c.unshared]);
    await this.#redis.petstoreRaise(keys.length, ...keys, this.#scriptClock(), ...args);
    counters.forEach((c, i) => {
      if (c.start === sent[i]!.start) c.unshared -= sent[i]!.unshared;
    });
  }

  #degrade(err: unknown): void {
    if (!this.#degraded) {
      this.#degraded = true;
      this.#metrics.limiterDegraded.set(1);
      this.#log.warn({ err, redisStatus: this.#redis.status }, 'Redis unreachable: rate limiting in memory on this instance');
    }
  }

  #recover(): void {
    if (!this.#degraded) return;
    this.#degraded = false;
    this.#metrics.limiterDegraded.set(0);
    this.#log.info('Redis reachable again: rate limiting is shared again');
  }
}
