/**
 * When Redis decides for the shared limiter, and how it is brought up to date after it could not: the
 * connection's state, the second a failed Redis is left alone, and the raises that set this instance's own
 * count in each window Redis may not hold right (docs/scale-out.md, "What happens during an outage").
 */
import type { FastifyBaseLogger } from 'fastify';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LimiterMetrics } from '../metrics.ts';
import { DAY_MS } from '../domain/durations.ts';
import type { MemoryRateLimiter, SubjectCounts } from './memory.ts';
import type { RedisClient } from './redis-client.ts';
import { COUNTER_MARGIN_MS } from './redis-scripts.ts';

type Args = (string | number)[];
export type LimiterRedis = RedisClient & {
  petstoreDecide: (numKeys: number, ...args: Args) => Promise<number[]>;
  petstoreMark: (numKeys: number, ...args: Args) => Promise<number[]>;
  petstoreHandBack: (numKeys: number, ...args: Args) => Promise<number[]>;
  petstoreRaise: (numKeys: number, ...args: Args) => Promise<number>;
};

/** How many subjects are raised at once while the instance decides in memory. */
const RAISE_BATCH = 500;

/** How long after its last raise a subject's `raised` hash is kept: past any window a raise may name. */
const RAISED_KEPT_MS = DAY_MS + COUNTER_MARGIN_MS;

export interface RedisSyncOptions {
  redis: LimiterRedis;
  /** The fallback, whose subjects' own counts the raises send. */
  fallback: MemoryRateLimiter;
  /** This instance's field in every window hash. */
  id: string;
  keysOf: (subject: string, windows: readonly { name: string }[]) => string[];
  scriptClock: () => number;
  /** Before the first raise: reads Redis's clock when this instance has never heard it, and names the fallback's windows by it. */
  anchorClock: () => Promise<void>;
  /** The command timeout: a command sent has its answer, or has failed, this long after it was sent. */
  timeoutMs: number;
  log: FastifyBaseLogger;
  metrics: LimiterMetrics;
}

export class RedisSync {
  readonly #redis: LimiterRedis;
  readonly #fallback: MemoryRateLimiter;
  readonly #id: string;
  readonly #keysOf: RedisSyncOptions['keysOf'];
  readonly #scriptClock: () => number;
  readonly #anchorClock: () => Promise<void>;
  readonly #timeoutMs: number;
  readonly #log: FastifyBaseLogger;
  readonly #metrics: LimiterMetrics;
  /** This instance's sequence number: each raise takes the next, and every other call carries the last. */
  #seq = 0;
  /** Decisions and marks sent and not yet answered or failed. */
  inFlight = 0;
  /** Hand-backs and raises sent without waiting, which close() lets finish. */
  readonly #tracked = new Set<Promise<unknown>>();
  /** Since a failure, a lost connection or an answer that disagreed, until this instance's counts are back in Redis. */
  #degraded = false;
  /** Set by a lost connection: Redis may have restarted empty, so every count this instance holds is raised. */
  #countsMayBeLost = false;
  /** The bringing of Redis up to date, while it runs. */
  #syncing: Promise<void> | undefined;
  #closing = false;
  /** The last connection error ioredis reported, for the start-up check's message. */
  #lastError: Error | undefined;
  /** After a failure Redis is left alone briefly, so a hung Redis costs one timeout per second, not per request. */
  #retryAtMs = 0;
  #retryTimer: NodeJS.Timeout | undefined;

  constructor(options: RedisSyncOptions) {
    this.#redis = options.redis;
    this.#fallback = options.fallback;
    this.#id = options.id;
    this.#keysOf = options.keysOf;
    this.#scriptClock = options.scriptClock;
    this.#anchorClock = options.anchorClock;
    this.#timeoutMs = options.timeoutMs;
    this.#log = options.log;
    this.#metrics = options.metrics;
    // Reported through degrade on the request path, and by reachableWithin at start.
    this.#redis.on('error', (err: Error) => (this.#lastError = err));
    // A lost connection may come back to a Redis restarted empty: it is brought up to date first,
    // as soon as it is back rather than at the next request.
    this.#redis.on('close', () => {
      if (this.#closing) return;
      this.#countsMayBeLost = true;
      this.degrade(undefined);
    });
    this.#redis.on('ready', () => this.#bringBack());
  }

  get seq(): number {
    return this.#seq;
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

  /**
   * Whether Redis decides now. Not while it is unreachable or was just found so; and not before
   * this instance's counts are in Redis, which this starts.
   */
  redisDecides(): boolean {
    if (this.#redis.status !== 'ready' || performance.now() < this.#retryAtMs) return false;
    if (!this.#degraded) return true;
    this.#bringBack();
    return false;
  }

  /** After a failure: Redis is left alone for a second, then brought up to date (requests or not). */
  leaveAlone(): void {
    this.#retryAtMs = performance.now() + 1000;
    this.#retryTimer ??= setTimeout(() => {
      this.#retryTimer = undefined;
      this.#bringBack();
    }, 1000).unref();
  }

  /** A command sent without waiting for it, which close() lets finish. */
  track(command: Promise<unknown>): void {
    const sent: Promise<unknown> = command.finally(() => this.#tracked.delete(sent));
    this.#tracked.add(sent);
  }

  degrade(err: unknown): void {
    if (this.#degraded) return;
    this.#degraded = true;
    this.#metrics.limiterDegraded.set(1);
    if (err === undefined && this.#redis.status === 'ready') {
      this.#log.info('Redis holds another count for this instance than it admitted: rate limiting in memory until Redis has its counts');
    } else {
      this.#log.warn({ err, redisStatus: this.#redis.status }, 'Redis unreachable: rate limiting in memory on this instance');
    }
  }

  /** Redis holds another part for this instance than it admitted: back to memory until a raise puts it right. */
  resync(): void {
    this.degrade(undefined);
    this.#bringBack();
  }

  async close(): Promise<void> {
    this.#closing = true;
    clearTimeout(this.#retryTimer);
    // Each settles within the command timeout, so a hung Redis cannot hold the shutdown; a bringing up
    // to date first, since it may send more.
    await this.#syncing;
    await Promise.allSettled(this.#tracked);
    this.#redis.disconnect();
  }

  /** Starts bringing Redis up to date when it is connected and that is owed; a failed attempt tries again after a second. */
  #bringBack(): void {
    if (!this.#degraded || this.#syncing || this.#closing || this.#redis.status !== 'ready') return;
    this.#syncing = this.#bringUpToDate().finally(() => (this.#syncing = undefined));
  }

  /**
   * Brings Redis up to what this instance admitted, a batch at a time: each subject's own counts set in
   * Redis (every subject with any after a lost connection, else those Redis may not hold right). Decisions
   * sent before settle first, so no raise is overtaken by an answer it did not include. What is admitted
   * meanwhile is sent just before Redis decides again, so decisions that follow count on top of it. On
   * failure it stays in memory and tries again a second later.
   */
  async #bringUpToDate(): Promise<void> {
    while (this.inFlight > 0) await sleep(Math.min(50, this.#timeoutMs));
    const everything = this.#countsMayBeLost;
    this.#countsMayBeLost = false;
    const cannot = (err: unknown) => {
      this.#countsMayBeLost ||= everything;
      this.leaveAlone();
      this.#log.warn({ err }, 'Redis answers again but could not be brought up to date: rate limiting stays in memory for now');
    };
    try {
      await this.#anchorClock();
    } catch (err) {
      return cannot(err);
    }
    const raised = new Set<string>();
    for (;;) {
      const due = [...this.#fallback.current()].filter(
        ([subject, counts]) => counts.unsynced || (everything && !raised.has(subject) && counts.counters.some((c) => c.own > 0)),
      );
      const batch = due.slice(0, RAISE_BATCH);
      const results = await Promise.allSettled(batch.map(([subject, counts]) => this.#raiseOne(subject, counts)));
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) return cannot(failed.reason);
      for (const [subject] of batch) raised.add(subject);
      if (due.length <= RAISE_BATCH) break;
    }
    for (const [subject, counts] of this.#fallback.current()) {
      if (counts.unsynced) this.track(this.#raiseOne(subject, counts).catch((err) => this.#raiseFailed(err)));
    }
    this.#recover();
  }

  /** A raise that failed after Redis decides again: back to memory; the subject, still unsynced, is raised again later. */
  #raiseFailed(err: unknown): void {
    this.degrade(err);
    this.leaveAlone();
  }

  /**
   * One subject's raise: its own count in each window, absolute, under the next sequence number. Once
   * Redis has it, the subject is in sync, unless this instance admitted more for it meanwhile.
   */
  async #raiseOne(subject: string, counts: SubjectCounts): Promise<void> {
    const changes = counts.changes;
    const counters = counts.counters;
    const keys = this.#keysOf(subject, counters);
    const args = counters.flatMap((c) => [c.start, c.end - c.start, c.own]);
    await this.#redis.petstoreRaise(keys.length, ...keys, this.#scriptClock(), this.#id, ++this.#seq, RAISED_KEPT_MS, ...args);
    this.#fallback.markSynced(subject, changes);
  }

  #recover(): void {
    if (!this.#degraded) return;
    this.#degraded = false;
    this.#metrics.limiterDegraded.set(0);
    this.#log.info('Redis reachable again: rate limiting is shared again');
  }
}
