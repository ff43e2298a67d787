/**
 * The in-process limiter: exact for one instance, as one callback runs at a time. Also the Redis limiter's
 * fallback, starting from the counts Redis last gave (observe) and reporting what it counted (current).
 * Windows are named by the wall clock, as the headers say, but a window lasts its length of real time once
 * counted in: a wall clock stepped forward or back neither ends it early nor reopens it (docs/rate-limits.md).
 */
import { systemClock, type Clock } from '../domain/clock.ts';
import { MINUTE_MS } from '../domain/durations.ts';
import { decisionOf, windowStart, type LimitDecision, type RateLimiter, type WindowLimit } from './limiter.ts';

/** One window's count; reset in place when its window has passed. */
export interface Counter {
  name: string;
  /** The window's start and end by the wall clock (epoch ms). */
  start: number;
  end: number;
  /** The window's end by the elapsed clock: it ends then, whatever the wall clock says. */
  endsAtElapsed: number;
  count: number;
  /** Admitted here since the counts were last handed to another limiter (the Redis limiter's unsent admissions). */
  unshared: number;
}

/** How far the wall clock may disagree with the elapsed one about a window's end before it counts as stepped. */
const STEPPED_MS = 1000;

/**
 * A window's end as told to clients at nowMs: where the wall clock names it, unless the clock was stepped
 * since it was counted; then nowMs plus the real time it has left, which is when it really ends.
 */
function shownEnd(c: Counter, nowMs: number, elapsed: number): number {
  const left = c.endsAtElapsed - elapsed;
  return Math.abs(c.end - nowMs - left) < STEPPED_MS ? c.end : nowMs + left;
}

export interface MemoryLimiterOptions {
  /** Windows are named by its wall clock and last by its elapsed clock; the system's by default. */
  clock?: Clock;
  /**
   * Whether the windows' own clock is unknown, so its wall clock may be off from them (the Redis limiter's
   * fallback before Redis ever answered). Then a window that admitted lasts until a whole window length
   * after its last admission: whatever the offset, no window of the true clock sees more than the limit.
   */
  unanchored?: () => boolean;
}

export class MemoryRateLimiter implements RateLimiter {
  /**
   * Key: subject; one counter per window, in the order of the subject's limits, so a decision costs
   * one lookup and no key text is built. Stale counters are swept once a minute of traffic.
   */
  readonly #counters = new Map<string, Counter[]>();
  /** Key: subject. The first mark of each subject's current period (see firstMark). */
  readonly #marks = new Map<string, { atElapsed: number; endsAtElapsed: number }>();
  readonly #clock: Clock;
  readonly #unanchored: () => boolean;
  #nextSweepElapsed = 0;

  constructor(options: MemoryLimiterOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#unanchored = options.unanchored ?? (() => false);
  }

  now(): number {
    return this.#clock.now();
  }

  async consume(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision> {
    return this.consumeNow(subject, limits);
  }

  consumeNow(subject: string, limits: readonly WindowLimit[]): LimitDecision {
    return this.decide(subject, limits, this.#clock.now(), true);
  }

  async peek(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision> {
    return this.decide(subject, limits, this.#clock.now(), false);
  }

  async firstMark(subject: string, untilMs: number): Promise<number> {
    return this.mark(subject, this.#clock.now(), untilMs);
  }

  /** Synchronous like decide; the Redis limiter's fallback too. The first mark is told as nowMs less the real time since. */
  mark(subject: string, nowMs: number, untilMs: number): number {
    const elapsed = this.#clock.elapsed();
    const current = this.#marks.get(subject);
    if (current && current.endsAtElapsed > elapsed) return nowMs - (elapsed - current.atElapsed);
    this.#marks.set(subject, { atElapsed: elapsed, endsAtElapsed: elapsed + untilMs - nowMs });
    return nowMs;
  }

  /** Synchronous, hence atomic: also what the Redis limiter falls back to when Redis is unreachable. */
  decide(subject: string, limits: readonly WindowLimit[], nowMs: number, count: boolean): LimitDecision {
    const elapsed = this.#clock.elapsed();
    if (elapsed >= this.#nextSweepElapsed) this.#sweep(elapsed);
    const counters = this.#countersOf(subject, limits);
    let allowed = true;
    for (let i = 0; i < limits.length; i++) {
      const w = limits[i]!;
      const c = counters[i]!;
      if (c.endsAtElapsed <= elapsed || c.name !== w.name) {
        // The next window by the wall clock, but never one at or before the window just counted: a
        // clock stepped back would otherwise reopen it. Its end in real time is where the wall clock
        // puts it now.
        const start = c.name === w.name ? Math.max(windowStart(nowMs, w.windowMs), c.end) : windowStart(nowMs, w.windowMs);
        c.name = w.name;
        c.start = start;
        c.end = start + w.windowMs;
        c.endsAtElapsed = elapsed + c.end - nowMs;
        c.count = 0;
        c.unshared = 0;
      }
      if (c.count >= w.limit) allowed = false;
    }
    if (allowed && count) {
      const unanchored = this.#unanchored();
      for (let i = 0; i < counters.length; i++) {
        const c = counters[i]!;
        c.count++;
        c.unshared++;
        if (unanchored) c.endsAtElapsed = Math.max(c.endsAtElapsed, elapsed + limits[i]!.windowMs);
      }
    }
    return decisionOf(
      limits,
      counters.map((c) => shownEnd(c, nowMs, elapsed) - (c.end - c.start)),
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
    const elapsed = this.#clock.elapsed();
    if (elapsed >= this.#nextSweepElapsed) this.#sweep(elapsed);
    const counters = this.#countersOf(subject, limits);
    for (let i = 0; i < limits.length; i++) {
      const c = counters[i]!;
      const sameWindow = c.name === limits[i]!.name && c.start === starts[i];
      c.count = sameWindow ? Math.max(c.count, counts[i]!) : counts[i]!;
      if (!sameWindow) c.unshared = 0;
      c.name = limits[i]!.name;
      c.start = starts[i]!;
      c.end = starts[i]! + limits[i]!.windowMs;
      c.endsAtElapsed = elapsed + c.end - nowMs;
    }
  }

  /** How many subjects' counters and marks it holds: what its memory grows with, bounded by the sweep. */
  get size(): number {
    return this.#counters.size + this.#marks.size;
  }

  /** Every subject's counters whose windows have not all ended. */
  *current(): Generator<[subject: string, counters: Counter[]]> {
    const elapsed = this.#clock.elapsed();
    for (const [subject, counters] of this.#counters) if (counters.some((c) => c.endsAtElapsed > elapsed)) yield [subject, counters];
  }

  async close(): Promise<void> {
    this.#counters.clear();
    this.#marks.clear();
  }

  #countersOf(subject: string, limits: readonly WindowLimit[]): Counter[] {
    let counters = this.#counters.get(subject);
    if (counters === undefined || counters.length !== limits.length) {
      counters = limits.map(() => ({ name: '', start: -1, end: 0, endsAtElapsed: -Infinity, count: 0, unshared: 0 }));
      this.#counters.set(subject, counters);
    }
    return counters;
  }

  #sweep(elapsed: number): void {
    this.#nextSweepElapsed = elapsed + MINUTE_MS;
    // A counter whose window has ended is worth nothing, nor what it admitted without Redis.
    for (const [subject, counters] of this.#counters) if (counters.every((c) => c.endsAtElapsed <= elapsed)) this.#counters.delete(subject);
    for (const [subject, m] of this.#marks) if (m.endsAtElapsed <= elapsed) this.#marks.delete(subject);
  }
}
