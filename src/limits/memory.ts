/**
 * The in-process limiter of the embedded default. JavaScript runs one callback at a time, so the
 * check-then-count below is atomic without locks; exact for one instance.
 */
import { MINUTE_MS } from '../domain/durations.ts';
import { decisionOf, windowStart, type LimitDecision, type RateLimiter, type WindowLimit } from './limiter.ts';

/** One window's count; reset in place when its window has passed. */
interface Counter {
  name: string;
  start: number;
  end: number;
  count: number;
}

export class MemoryRateLimiter implements RateLimiter {
  /**
   * Key: subject; one counter per window, in the order of the subject's limits, so a decision costs
   * one lookup and no key text is built. Stale counters are swept once a minute of traffic.
   */
  readonly #counters = new Map<string, Counter[]>();
  /** Key: subject. The first mark of each subject's current period (see firstMark). */
  readonly #marks = new Map<string, { atMs: number; endMs: number }>();
  #nextSweepMs = 0;

  async consume(subject: string, limits: readonly WindowLimit[], nowMs: number): Promise<LimitDecision> {
    return this.consumeNow(subject, limits, nowMs);
  }

  consumeNow(subject: string, limits: readonly WindowLimit[], nowMs: number): LimitDecision {
    return this.decide(subject, limits, nowMs, true);
  }

  async peek(subject: string, limits: readonly WindowLimit[], nowMs: number): Promise<LimitDecision> {
    return this.decide(subject, limits, nowMs, false);
  }

  async firstMark(subject: string, nowMs: number, periodMs: number): Promise<number> {
    return this.mark(subject, nowMs, periodMs);
  }

  /** Synchronous like decide; the Redis limiter's fallback too. */
  mark(subject: string, nowMs: number, periodMs: number): number {
    const current = this.#marks.get(subject);
    if (current && current.endMs > nowMs) return current.atMs;
    this.#marks.set(subject, { atMs: nowMs, endMs: nowMs + periodMs });
    return nowMs;
  }

  /** Synchronous, hence atomic: also what the Redis limiter falls back to when Redis is unreachable. */
  decide(subject: string, limits: readonly WindowLimit[], nowMs: number, count: boolean): LimitDecision {
    if (nowMs >= this.#nextSweepMs) this.#sweep(nowMs);
    let counters = this.#counters.get(subject);
    if (counters === undefined || counters.length !== limits.length) {
      counters = limits.map(() => ({ name: '', start: -1, end: 0, count: 0 }));
      this.#counters.set(subject, counters);
    }
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
    );
  }

  async close(): Promise<void> {
    this.#counters.clear();
    this.#marks.clear();
  }

  #sweep(nowMs: number): void {
    this.#nextSweepMs = nowMs + MINUTE_MS;
    // A counter whose window has ended is worth nothing.
    for (const [subject, counters] of this.#counters) if (counters.every((c) => c.end <= nowMs)) this.#counters.delete(subject);
    for (const [subject, m] of this.#marks) if (m.endMs <= nowMs) this.#marks.delete(subject);
  }
}
