/**
 * The shared limiter (docs/scale-out.md): every window of a request checked and counted by one Lua script on
 * Redis's clock, a subject's keys hash-tagged into one Cluster slot, each instance's part of a window its own
 * field (redis-scripts.ts). While Redis is slow or down, a fallback in memory decides from what Redis last said
 * and what this instance admitted; Redis then gets this instance's own counts, absolute, before it decides again
 * (redis-sync.ts).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { LimiterMetrics } from '../metrics.ts';
import { systemClock, type Clock } from '../domain/clock.ts';
import { decisionOf, windowStart, type LimitDecision, type RateLimiter, type WindowLimit } from './limiter.ts';
import { MemoryRateLimiter } from './memory.ts';
import { QuotaBlocks, type BlockWindows } from './quota-blocks.ts';
import { connectRedis } from './redis-client.ts';
import type { SharedTable } from './shared-table.ts';
import { DECIDE, HAND_BACK, MARK, RAISE } from './redis-scripts.ts';
import { RedisSync, type LimiterRedis } from './redis-sync.ts';

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
  /** Where the fallback keeps its counts (RATE_LIMIT_MEMORY_BYTES); a table of its own by default. */
  fallbackTable?: SharedTable;
  /** This instance's id in Redis (random by default): a test's way to play two processes, or one restarted. */
  instanceId?: string;
  /**
   * Hears Redis's clock each time a reply sets it, as its offset from the monotonic clock (now = floor(offset +
   * elapsed)): how the workers a process's limiter decides for tell the time it decides by (src/workers/remote-limiter.ts).
   */
  onClock?: (offsetMs: number) => void;
  log: FastifyBaseLogger;
  metrics: LimiterMetrics;
}

/** How long a block of quota may be spent from before its rest is handed back. */
const BLOCK_LIFETIME_MS = 1000;

export class RedisRateLimiter implements RateLimiter {
  readonly #redis: LimiterRedis;
  /** Decides while Redis cannot, from what Redis last said of each subject and what this instance admitted. */
  readonly #fallback: MemoryRateLimiter;
  /** Brings Redis up to date with this instance's own counts, and says whether Redis decides now. */
  readonly #sync: RedisSync;
  readonly #blocks: QuotaBlocks;
  readonly #blockSweep: NodeJS.Timeout;
  /** Requests admitted from blocks since the metric was last told. */
  #preadmitted = 0;
  /** Per subject, the call to Redis for its next block while one is on its way. */
  readonly #refills = new Map<string, Promise<LimitDecision>>();
  /** Each limits array's block cap (see #capOf). */
  readonly #caps = new WeakMap<readonly WindowLimit[], number>();
  readonly #prefix: string;
  readonly #id: string;
  readonly #fakeClock: Clock | undefined;
  readonly #local: Clock;
  readonly #metrics: LimiterMetrics;
  readonly #onClock: ((offsetMs: number) => void) | undefined;
  /** Redis's clock as last read, and the monotonic clock's reading then. */
  #redisClock: { ms: number; at: number } | undefined;

  constructor(options: RedisLimiterOptions) {
    this.#prefix = options.keyPrefix ?? 'petstore';
    this.#id = options.instanceId ?? randomBytes(6).toString('base64url');
    this.#fakeClock = options.fakeClock;
    this.#local = options.clock ?? systemClock;
    this.#fallback = new MemoryRateLimiter({
      clock: { now: () => this.now(), elapsed: () => this.#elapsed() },
      // Until Redis first answers, this instance knows only its own clock, which may be off from Redis's.
      unanchored: () => this.#redisClock === undefined && this.#fakeClock === undefined,
      table: options.fallbackTable,
    });
    this.#metrics = options.metrics;
    this.#onClock = options.onClock;
    this.#redis = connectRedis({
      urls: options.urls,
      cluster: options.cluster ?? false,
      tlsCa: options.tlsCa,
      timeoutMs: options.timeoutMs ?? 250,
    }) as LimiterRedis;
    this.#redis.defineCommand('petstoreDecide', { lua: DECIDE });
    this.#redis.defineCommand('petstoreMark', { lua: MARK });
    this.#redis.defineCommand('petstoreHandBack', { lua: HAND_BACK });
    this.#redis.defineCommand('petstoreRaise', { lua: RAISE });
    this.#sync = new RedisSync({
      redis: this.#redis,
      fallback: this.#fallback,
      id: this.#id,
      keysOf: (subject, names) => this.#keysOf(subject, names),
      scriptClock: () => this.#scriptClock(),
      anchorClock: () => this.#anchorClock(),
      timeoutMs: options.timeoutMs ?? 250,
      log: options.log,
      metrics: options.metrics,
    });
    this.#blocks = new QuotaBlocks({
      maxSize: options.maxBlock ?? 1,
      lifetimeMs: BLOCK_LIFETIME_MS,
      onUnspent: (subject, block, unspent) => this.#handBack(subject, block, unspent),
    });
    // Unspent requests of blocks no request came back for are handed back within a lifetime or two.
    this.#blockSweep = setInterval(() => {
      this.#blocks.sweep(this.now());
      this.#countPreadmitted();
    }, BLOCK_LIFETIME_MS).unref();
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
  ready(): Promise<void> {
    return this.#sync.ready();
  }

  /** For the start-up check: undefined once connected within withinMs, else why not. */
  reachableWithin(withinMs: number): Promise<string | undefined> {
    return this.#sync.reachableWithin(withinMs);
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
    if (!this.#sync.redisDecides()) return this.#fallbackMark(subject, untilMs, undefined);
    this.#sync.inFlight++;
    try {
      const [first, nowMs] = await this.#redis.petstoreMark(1, `${this.#prefix}:{${subject}}:mark`, this.#scriptClock(), untilMs);
      this.#readClock(Number(nowMs));
      return Number(first);
    } catch (err) {
      this.#sync.leaveAlone();
      return this.#fallbackMark(subject, untilMs, err);
    } finally {
      this.#sync.inFlight--;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#blockSweep);
    this.#blocks.releaseAll();
    this.#countPreadmitted();
    await this.#sync.close();
    await this.#fallback.close();
  }

  /** `cap`: the largest block these limits allow (QuotaBlocks.capFor), when counting; 1 asks for no block. */
  async #decide(subject: string, limits: readonly WindowLimit[], count: boolean, cap = 1): Promise<LimitDecision> {
    if (!this.#sync.redisDecides()) return this.#fallbackDecision(subject, limits, count, undefined);
    const keys = this.#keysOf(subject, limits);
    const args = limits.flatMap((w) => [w.limit, w.windowMs]);
    const wanted = cap > 1 ? this.#blocks.sizeFor(subject, cap) : 1;
    let reply: number[];
    this.#sync.inFlight++;
    try {
      reply = await this.#redis.petstoreDecide(
        keys.length,
        ...keys,
        this.#scriptClock(),
        this.#id,
        this.#sync.seq,
        count ? 1 : 0,
        wanted,
        ...args,
      );
    } catch (err) {
      // Redis may have counted it all the same: this instance's next raise says what it really admitted.
      this.#sync.leaveAlone();
      const decision = this.#fallbackDecision(subject, limits, count, err);
      this.#fallback.markUnsynced(subject);
      return decision;
    } finally {
      this.#sync.inFlight--;
    }
    const counted = Number(reply[0]);
    const nowMs = Number(reply[1]);
    this.#readClock(nowMs);
    if (counted < 0) return this.#fallbackDecision(subject, limits, count, new Error('a decision overtaken by a raise'));
    const starts = limits.map((w) => windowStart(nowMs, w.windowMs));
    const totals = limits.map((_, i) => Number(reply[i * 2 + 2]));
    const owns = limits.map((_, i) => Number(reply[i * 2 + 3]));
    // Redis holding another part for this instance than it admitted: a raise puts it right, in the background.
    if (this.#fallback.observe(subject, limits, starts, totals, owns, counted, nowMs)) this.#sync.resync();
    if (counted > 0 && cap > 1) {
      const windows = { names: limits.map((w) => w.name), starts, limits: limits.map((w) => w.limit), countsAfter: totals };
      const remaining = this.#blocks.granted(subject, counted, windows, nowMs);
      return decisionOf(limits, starts, true, remaining, nowMs);
    }
    const allowed = count ? counted > 0 : totals.every((n, i) => n < limits[i]!.limit);
    return decisionOf(
      limits,
      starts,
      allowed,
      totals.map((n, i) => limits[i]!.limit - n),
      nowMs,
    );
  }

  /** The subject's window hashes (the {subject} hash tag keeps them in one Cluster slot), then its `raised` hash. */
  #keysOf(subject: string, windows: readonly { name: string }[]): string[] {
    const keys = windows.map((w) => `${this.#prefix}:{${subject}}:${w.name}:by-instance`);
    keys.push(`${this.#prefix}:{${subject}}:raised`);
    return keys;
  }

  /**
   * An instance that decided in memory before it ever heard Redis named those windows by its own clock, which
   * may be off from Redis's: Redis's TIME names them anew before they are raised, with what they admitted.
   */
  async #anchorClock(): Promise<void> {
    if (this.#redisClock !== undefined || this.#fakeClock !== undefined) return;
    const [seconds, micros] = await this.#redis.time();
    const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    this.#fallback.anchor(nowMs);
    this.#readClock(nowMs);
  }

  /** A reply's `now` sets the clock the fallback and the blocks go by. */
  #readClock(nowMs: number): void {
    this.#redisClock = { ms: nowMs, at: this.#local.elapsed() };
    this.#onClock?.(nowMs - this.#redisClock.at);
  }

  /** Pre-admissions are counted in a plain number on the request path and reach the metric once a second. */
  #countPreadmitted(): void {
    if (this.#preadmitted === 0) return;
    this.#metrics.limiterPreadmitted.inc(this.#preadmitted);
    this.#preadmitted = 0;
  }

  /**
   * Hands a block's unspent requests back; this instance's own count drops once Redis says it did. One that
   * cannot be sent, or whose answer never comes, leaves the subject for the next raise to put right.
   */
  #handBack(subject: string, block: BlockWindows, unspent: number): void {
    if (!this.#sync.redisDecides()) {
      this.#fallback.adjustOwn(subject, block.starts, -unspent);
      this.#fallback.markUnsynced(subject);
      return;
    }
    const keys = this.#keysOf(
      subject,
      block.names.map((name) => ({ name })),
    );
    const sent = this.#redis.petstoreHandBack(
      keys.length,
      ...keys,
      this.#scriptClock(),
      this.#id,
      this.#sync.seq,
      unspent,
      ...block.starts,
    );
    this.#sync.track(
      sent.then(
        (took) => {
          if (Number(took[0]) < 0) return this.#fallback.markUnsynced(subject);
          this.#fallback.adjustOwn(
            subject,
            block.starts.map((start, i) => (Number(took[i]) === 1 ? start : -1)),
            -unspent,
          );
        },
        () => {
          this.#fallback.adjustOwn(subject, block.starts, -unspent);
          this.#fallback.markUnsynced(subject);
          this.#sync.leaveAlone();
        },
      ),
    );
  }

  #fallbackDecision(subject: string, limits: readonly WindowLimit[], count: boolean, err: unknown): LimitDecision {
    this.#sync.degrade(err);
    this.#metrics.limiterFallbacks.inc();
    return this.#fallback.decide(subject, limits, this.now(), count);
  }

  #fallbackMark(subject: string, untilMs: number, err: unknown): number {
    this.#sync.degrade(err);
    this.#metrics.limiterFallbacks.inc();
    return this.#fallback.mark(subject, this.now(), untilMs);
  }
}
