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
import { windowStart, type LimitDecision, type RateLimiter, type WindowLimit } from './limiter.ts';
import { MemoryRateLimiter } from './memory.ts';
import { connectRedis, type RedisClient } from './redis-client.ts';

// KEYS: one counter per window. ARGV[1]: 1 to count, 0 to look only; then limit and TTL per window.
// Returns { admitted (1/0), count of window 1, count of window 2, ... } after the decision.
const SCRIPT = `
local counts = {}
local admitted = 1
for i, key in ipairs(KEYS) do
  counts[i] = tonumber(redis.call('GET', key) or '0')
  if counts[i] >= tonumber(ARGV[i * 2]) then admitted = 0 end
end
if admitted == 1 and ARGV[1] == '1' then
  for i, key in ipairs(KEYS) do
    counts[i] = redis.call('INCR', key)
    if counts[i] == 1 then redis.call('PEXPIRE', key, ARGV[i * 2 + 1]) end
  end
end
table.insert(counts, 1, admitted)
return counts`;

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
  log: FastifyBaseLogger;
  metrics: Metrics;
}

type LimitCommand = (numKeys: number, ...args: (string | number)[]) => Promise<number[]>;
type MarkCommand = (numKeys: number, key: string, nowMs: number, periodMs: number) => Promise<string>;

export class RedisRateLimiter implements RateLimiter {
  readonly #redis: RedisClient & { petstoreLimit: LimitCommand; petstoreMark: MarkCommand };
  readonly #fallback = new MemoryRateLimiter();
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
    }) as RedisClient & { petstoreLimit: LimitCommand; petstoreMark: MarkCommand };
    this.#redis.defineCommand('petstoreLimit', { lua: SCRIPT });
    this.#redis.defineCommand('petstoreMark', { lua: MARK_SCRIPT });
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
    return this.#decide(subject, limits, nowMs, true);
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
    this.#redis.disconnect();
    await this.#fallback.close();
  }

  async #decide(subject: string, limits: readonly WindowLimit[], nowMs: number, count: boolean): Promise<LimitDecision> {
    if (this.#redis.status !== 'ready' || performance.now() < this.#retryAtMs) {
      return this.#fallbackDecision(subject, limits, nowMs, count, undefined);
    }
    const starts = limits.map((w) => windowStart(nowMs, w.windowMs));
    // The {subject} hash tag keeps a subject's keys in one slot, as Redis Cluster needs for one script.
    const keys = limits.map((w, i) => `${this.#prefix}:{${subject}}:${w.name}:${starts[i]}`);
    const args = limits.flatMap((w) => [w.limit, w.windowMs + 5000]);
    let reply: number[];
    try {
      reply = await this.#redis.petstoreLimit(keys.length, ...keys, count ? 1 : 0, ...args);
    } catch (err) {
      this.#retryAtMs = performance.now() + 1000;
      return this.#fallbackDecision(subject, limits, nowMs, count, err);
    }
    this.#recover();
    return {
      allowed: reply[0] === 1,
      windows: limits.map((w, i) => ({
        name: w.name,
        limit: w.limit,
        windowMs: w.windowMs,
        remaining: Math.max(0, w.limit - Number(reply[i + 1])),
        resetAtMs: starts[i]! + w.windowMs,
      })),
    };
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
