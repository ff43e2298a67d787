/**
 * The in-process limiter: exact for one instance, as one callback runs at a time. Also the Redis limiter's
 * fallback, starting from the counts Redis last gave (observe) and reporting what it counted (current).
 */
import { MINUTE_MS } from '../domain/durations.ts';
import { decisionOf, windowStart, type LimitDecision, type RateLimiter, type WindowLimit } from './limiter.ts';

/** One window's count; reset in place when its window has passed. */
export interface Counter {
  name: string;
  start: number;
  end: number;
  count: number;
}

export interface MemoryLimiterOptions {
  /** The clock windows are reckoned by; the system clock by default. */
  now?: () => number;
}

export class MemoryRateLimiter implements RateLimiter {
  /**
   * Key: subject; one counter per window, in the order of the subject's limits, so a decision costs
   * one lookup and no key text is built. Stale counters are swept once a minute of traffic.
   */
  readonly #counters = new Map<string, Counter[]>();
  /** Key: subject. The first mark of each subject's current period (see firstMark). */
  readonly #marks = new Map<string, { atMs: number; endMs: number }>();
  readonly #now: () => number;
  #nextSweepMs = 0;

  constructor(options: MemoryLimiterOptions = {}) {
    this.#now = options.now ?? Date.now;
  }

  now(): number {
    return this.#now();
  }

  async consume(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision> {
    return this.consumeNow(subject, limits);
  }

  consumeNow(subject: string, limits: readonly WindowLimit[]): LimitDecision {
    return this.decide(subject, limits, this.#now(), true);
  }

  async peek(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision> {
    return this.decide(subject, limits, this.#now(), false);
  }

  async firstMark(subject: string, untilMs: number): Promise<number> {
    return this.mark(subject, this.#now(), untilMs);
  }

  /** Synchronous like decide; the Redis limiter's fallback too. */
  mark(subject: string, nowMs: number, untilMs: number): number {
    const current = this.#marks.get(subject);
    if (current && current.endMs > nowMs) return current.atMs;
    this.#marks.set(subject, { atMs: nowMs, endMs: untilMs });
    return nowMs;
  }

  /** Synchronous, hence atomic: also what the Redis limiter falls back to when Redis is unreachable. */
  decide(subject: string, limits: readonly WindowLimit[], nowMs: number, count: boolean): LimitDecision {
    if (nowMs >= this.#nextSweepMs) this.#sweep(nowMs);
    const counters = this.#countersOf(subject, limits);
    let allowed = true;
    for (let i = 0; i < limits.length; i++) {
      const w = limits[i]!;
      const c = counters[i]!;
      const start = windowStart(nowMs, w.windowMs);
      if (c.start !== start || c.name !== w.name) {
        c.name = w.name;
        c.start = start;
        c.end = start + w.windowMs;
        c.count = 0;
      }
      if (c.count >= w.limit) allowed = false;
    }
    if (allowed && count) for (const c of counters) c.count++;
    return decisionOf(
      limits,
      counters.map((c) => c.start),
      allowed,
      counters.map((c, i) => limits[i]!.limit - c.count),
      nowMs,
    );
  }

  /**
   * Takes another limiter's counts as this one's (the Redis limiter's answers for the subject); within
   * a window it keeps the higher, so a reply that arrives late cannot take back what was counted here.
   */
  observe(subject: string, limits: readonly WindowLimit[], starts: readonly number[], counts: readonly number[], nowMs: number): void {
    if (nowMs >= this.#nextSweepMs) this.#sweep(nowMs);
    const counters = this.#countersOf(subject, limits);
    for (let i = 0; i < limits.length; i++) {
      const c = counters[i]!;
      const sameWindow = c.name === limits[i]!.name && c.start === starts[i];
      c.count = sameWindow ? Math.max(c.count, counts[i]!) : counts[i]!;
      c.name = limits[i]!.name;
      c.start = starts[i]!;
      c.end = starts[i]! + limits[i]!.windowMs;
    }
  }

  /** How many subjects' counters and marks it holds: what its memory grows with, bounded by the sweep. */
  get size(): number {
    return this.#counters.size + this.#marks.size;
  }

  /** Every subject's counters whose windows have not all ended at nowMs. */
  *current(nowMs: number): Generator<[subject: string, counters: readonly Readonly<Counter>[]]> {
    for (const [subject, counters] of this.#counters) if (counters.some((c) => c.end > nowMs)) yield [subject, counters];
  }

  async close(): Promise<void> {
    this.#counters.clear();
    this.#marks.clear();
  }

  #countersOf(subject: string, limits: readonly WindowLimit[]): Counter[] {
    let counters = this.#counters.get(subject);
    if (counters === undefined || counters.length !== limits.length) {
      counters = limits.map(() => ({ name: '', start: -1, end: 0, count: 0 }));
      this.#counters.set(subject, counters);
    }
    return counters;
  }

  #sweep(nowMs: number): void {
    this.#nextSweepMs = nowMs + MINUTE_MS;
    // A counter whose window has ended is worth nothing.
    for (const [subject, counters] of this.#counters) if (counters.every((c) => c.end <= nowMs)) this.#counters.delete(subject);
    for (const [subject, m] of this.#marks) if (m.endMs <= nowMs) this.#marks.delete(subject);
  }
}
