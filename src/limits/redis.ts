/**
 * The shared limiter: counters in Redis, so every instance enforces one global limit per key.
 *
 * All windows of a request are checked and counted by one Lua script, atomically and in one round
 * trip. Keys are named by subject, window and window start, so a new window starts from zero by
 * construction; each expires a little after its window ends.
 *
 * In a Redis Cluster every key of one subject carries the subject as a hash tag (`{key:ID}`), so they
 * sit in one slot and one script still decides atomically; subjects spread over the slots.
 *
 * When Redis cannot answer within a short timeout (or is known to be disconnected) the decision is
 * taken by an in-memory limiter of this instance instead: limits stay enforced per instance, headers
 * are still sent, a warning is logged and the fallback is counted. ioredis reconnects by itself, and
 * decisions return to Redis as soon as it is back (in a cluster: once a replica has taken over).
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Metrics } from '../metrics.ts';
import { decisionOf, windowStart, type LimitDecision, type RateLimiter, type WindowLimit } from './limiter.ts';
import { MemoryRateLimiter } from './memory.ts';
import { QuotaBlocks } from './quota-blocks.ts';
import { connectRedis, type RedisClient } from './redis-client.ts';

// KEYS: one counter per window. ARGV[1]: 1 to count, 0 to look only; ARGV[2]: the block wanted (1:
// this request alone); then limit and TTL per window. A block larger than 1 is granted only while every
// window has at least BLOCK_HEADROOM blocks left; else the request is counted alone, so the last of a
// window's quota is always decided one request at a time.
// Returns { requests counted (0: refused or looked only), count of window 1, count of window 2, ... }.
const BLOCK_HEADROOM = 10;
const SCRIPT = `
local counts = {}
local admitted = true
local size = tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  counts[i] = tonumber(redis.call('GET', key) or '0')
  local limit = tonumber(ARGV[i * 2 + 1])
  if counts[i] >= limit then admitted = false end
  if size > 1 and limit - counts[i] < size * ${BLOCK_HEADROOM} then size = 1 end
end
if not admitted or ARGV[1] ~= '1' then size = 0 end
if size > 0 then
  for i, key in ipairs(KEYS) do
    counts[i] = redis.call('INCRBY', key, size)
    if counts[i] == size then redis.call('PEXPIRE', key, ARGV[i * 2 + 2]) end
  end
end
table.insert(counts, 1, size)
return counts`;

// KEYS: the counters a block was counted in. ARGV[1]: its unspent requests, handed back to counters
// that still exist (one whose window ended has expired, and must not come back without its expiry).
const UNSPENT_SCRIPT = `
for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then redis.call('DECRBY', key, ARGV[1]) end
end
return 0`;

// KEYS[1]: the mark. ARGV: now, period. The stored first mark, or now when there was none.
const MARK_SCRIPT = `
local first = redis.call('GET', KEYS[1])
if first then return first end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]`;

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
  log: FastifyBaseLogger;
  metrics: Metrics;
}

type LimitCommand = (numKeys: number, ...args: (string | number)[]) => Promise<number[]>;
type MarkCommand = (numKeys: number, key: string, nowMs: number, periodMs: number) => Promise<string>;
type UnspentCommand = (numKeys: number, ...args: (string | number)[]) => Promise<number>;
type LimiterRedis = RedisClient & { petstoreLimit: LimitCommand; petstoreMark: MarkCommand; petstoreUnspent: UnspentCommand };

/** How long a block of quota may be spent from before its rest is handed back. */
const BLOCK_LIFETIME_MS = 1000;

export class RedisRateLimiter implements RateLimiter {
  readonly #redis: LimiterRedis;
  readonly #fallback = new MemoryRateLimiter();
  readonly #blocks: QuotaBlocks;
  readonly #blockSweep: NodeJS.Timeout;
  /** Requests admitted from blocks since the metric was last told. */
  #preadmitted = 0;
  /** Per subject, the call to Redis for its next block while one is on its way. */
  readonly #refills = new Map<string, Promise<LimitDecision>>();
  /** Each limits array's block cap (see #capOf). */
  readonly #caps = new WeakMap<readonly WindowLimit[], number>();
  /** Hand-backs on their way, which close() lets finish. */
  readonly #handingBack = new Set<Promise<unknown>>();
  readonly #prefix: string;
  readonly #log: FastifyBaseLogger;
  readonly #metrics: Metrics;
  #degraded = false;
  /** The last connection error ioredis reported, for the start-up check's message. */
  #lastError: Error | undefined;
  /** After a failure Redis is left alone briefly, so a hung Redis costs one timeout per second, not per request. */
  #retryAtMs = 0;

  constructor(options: RedisLimiterOptions) {
    this.#prefix = options.keyPrefix ?? 'petstore';
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
    this.#blocks = new QuotaBlocks({
      maxSize: options.maxBlock ?? 1,
      lifetimeMs: BLOCK_LIFETIME_MS,
      onUnspent: (block, unspent) => this.#handBack(block.counters, unspent),
    });
    // Unspent requests of blocks no request came back for are handed back within a lifetime or two.
    this.#blockSweep = setInterval(() => {
      this.#blocks.sweep(Date.now());
      this.#countPreadmitted();
    }, BLOCK_LIFETIME_MS).unref();
    // Reported through #degrade on the request path, and by reachableWithin at start.
    this.#redis.on('error', (err: Error) => (this.#lastError = err));
    this.#redis.on('ready', () => this.#recover());
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

  consume(subject: string, limits: readonly WindowLimit[], nowMs: number): Promise<LimitDecision> {
    const cap = this.#capOf(limits);
    if (cap <= 1) return this.#decide(subject, limits, nowMs, true);
    const starts = limits.map((w) => windowStart(nowMs, w.windowMs));
    const preadmitted = this.#spendBlock(subject, limits, starts, nowMs);
    return preadmitted ? Promise.resolve(preadmitted) : this.#consumeFromBlock(subject, limits, starts, nowMs, cap);
  }

  /** Only a request pre-admitted from a block this instance holds is decided at once; every other asks Redis. */
  consumeNow(subject: string, limits: readonly WindowLimit[], nowMs: number): LimitDecision | undefined {
    if (this.#capOf(limits) <= 1) return undefined;
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
    return decisionOf(limits, starts, true, remaining);
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
    const refill = this.#decide(subject, limits, nowMs, true, cap);
    this.#refills.set(subject, refill);
    try {
      return await refill;
    } finally {
      if (this.#refills.get(subject) === refill) this.#refills.delete(subject);
    }
  }

  peek(subject: string, limits: readonly WindowLimit[], nowMs: number): Promise<LimitDecision> {
    return this.#decide(subject, limits, nowMs, false);
  }

  async firstMark(subject: string, nowMs: number, periodMs: number): Promise<number> {
    if (this.#redis.status !== 'ready' || performance.now() < this.#retryAtMs)
      return this.#fallbackMark(subject, nowMs, periodMs, undefined);
    try {
      const first = Number(await this.#redis.petstoreMark(1, `${this.#prefix}:{${subject}}:mark`, nowMs, periodMs));
      this.#recover();
      return first;
    } catch (err) {
      this.#retryAtMs = performance.now() + 1000;
      return this.#fallbackMark(subject, nowMs, periodMs, err);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#blockSweep);
    this.#blocks.releaseAll();
    this.#countPreadmitted();
    // Each settles within the command timeout, so a hung Redis cannot hold the shutdown.
    await Promise.allSettled(this.#handingBack);
    this.#redis.disconnect();
    await this.#fallback.close();
  }

  /** `cap`: the largest block these limits allow (QuotaBlocks.capFor), when counting; 1 asks for no block. */
  async #decide(subject: string, limits: readonly WindowLimit[], nowMs: number, count: boolean, cap = 1): Promise<LimitDecision> {
    if (this.#redis.status !== 'ready' || performance.now() < this.#retryAtMs) {
      return this.#fallbackDecision(subject, limits, nowMs, count, undefined);
    }
    const starts = limits.map((w) => windowStart(nowMs, w.windowMs));
    // The {subject} hash tag keeps a subject's keys in one slot, as Redis Cluster needs for one script.
    const keys = limits.map((w, i) => `${this.#prefix}:{${subject}}:${w.name}:${starts[i]}`);
    const args = limits.flatMap((w) => [w.limit, w.windowMs + 5000]);
    const wanted = cap > 1 ? this.#blocks.sizeFor(subject, cap) : 1;
    let reply: number[];
    try {
      reply = await this.#redis.petstoreLimit(keys.length, ...keys, count ? 1 : 0, wanted, ...args);
    } catch (err) {
      this.#retryAtMs = performance.now() + 1000;
      return this.#fallbackDecision(subject, limits, nowMs, count, err);
    }
    this.#recover();
    const counted = Number(reply[0]);
    const countsAfter = limits.map((_, i) => Number(reply[i + 1]));
    if (counted > 0 && cap > 1) {
      const windows = { counters: keys, starts, limits: limits.map((w) => w.limit), countsAfter };
      const remaining = this.#blocks.granted(subject, counted, windows, nowMs);
      return decisionOf(limits, starts, true, remaining);
    }
    const allowed = count ? counted > 0 : countsAfter.every((n, i) => n < limits[i]!.limit);
    return decisionOf(
      limits,
      starts,
      allowed,
      countsAfter.map((n, i) => limits[i]!.limit - n),
    );
  }

  /** Pre-admissions are counted in a plain number on the request path and reach the metric once a second. */
  #countPreadmitted(): void {
    if (this.#preadmitted === 0) return;
    this.#metrics.limiterPreadmitted.inc(this.#preadmitted);
    this.#preadmitted = 0;
  }

  /** Hands a block's unspent requests back; one that cannot be handed back stays counted until its window ends. */
  #handBack(counters: readonly string[], unspent: number): void {
    if (this.#redis.status !== 'ready') return;
    const sent: Promise<unknown> = this.#redis.petstoreUnspent(counters.length, ...counters, unspent).then(
      () => this.#handingBack.delete(sent),
      () => this.#handingBack.delete(sent),
    );
    this.#handingBack.add(sent);
  }

  #fallbackDecision(subject: string, limits: readonly WindowLimit[], nowMs: number, count: boolean, err: unknown): LimitDecision {
    this.#degrade(err);
    return this.#fallback.decide(subject, limits, nowMs, count);
  }

  #fallbackMark(subject: string, nowMs: number, periodMs: number, err: unknown): number {
    this.#degrade(err);
    return this.#fallback.mark(subject, nowMs, periodMs);
  }

  #degrade(err: unknown): void {
    if (!this.#degraded) {
      this.#degraded = true;
      this.#metrics.limiterDegraded.set(1);
      this.#log.warn({ err, redisStatus: this.#redis.status }, 'Redis unreachable: rate limiting in memory on this instance');
    }
    this.#metrics.limiterFallbacks.inc();
  }

  #recover(): void {
    if (!this.#degraded) return;
    this.#degraded = false;
    this.#metrics.limiterDegraded.set(0);
    this.#log.info('Redis reachable again: rate limiting is shared again');
  }
}
