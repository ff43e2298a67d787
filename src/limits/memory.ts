/**
 * The in-process limiter: exact for one instance, as one callback runs at a time. Also the Redis limiter's
 * fallback, holding what Redis last said others counted (observe) beside what this instance admitted itself.
 * Windows are named by the wall clock, as the headers say, but real (elapsed) time bounds each: a window lasts
 * at most its length of real time from when it began counting, and a wall clock stepped back does not reopen
 * it within that length; one stepped forward does not end it early (docs/rate-limits.md, "A clock that jumps").
 */
import { systemClock, type Clock } from '../domain/clock.ts';
import { MINUTE_MS } from '../domain/durations.ts';
import { decisionOf, windowStart, type LimitDecision, type RateLimiter, type WindowLimit } from './limiter.ts';

/** One window's count; begun afresh in place when its window has passed. */
export interface Counter {
  name: string;
  /** The window's start and end as its clock names them (epoch ms). */
  start: number;
  end: number;
  /** When it began counting, and when it ends, by the elapsed clock: it ends then, whatever the wall clock says. */
  begunAtElapsed: number;
  endsAtElapsed: number;
  /** Admitted by this instance in this window. */
  own: number;
  /** Counted elsewhere in this window, as last heard (the Redis limiter's other instances); 0 in the embedded limiter. */
  others: number;
}

/** A subject's counters, one per window in the order of its limits. */
export interface SubjectCounts {
  counters: Counter[];
  /** Whether Redis may not hold this instance's own counts (the Redis limiter raises it then). */
  unsynced: boolean;
  /** Bumped at each change of `own` that Redis did not confirm, so a raise knows whether it sent the latest. */
  changes: number;
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

/** Begins the window of `w` that nowMs falls in, from `elapsed` until its end by that clock (at most its length). */
function begin(c: Counter, w: WindowLimit, nowMs: number, elapsed: number, carried: number): void {
  c.name = w.name;
  c.start = windowStart(nowMs, w.windowMs);
  c.end = c.start + w.windowMs;
  c.begunAtElapsed = elapsed;
  c.endsAtElapsed = elapsed + c.end - nowMs;
  c.own = 0;
  c.others = carried;
}

export interface MemoryLimiterOptions {
  /** Windows are named by its wall clock and last by its elapsed clock; the system's by default. */
  clock?: Clock;
  /**
   * Whether the windows' own clock is unknown, so its wall clock may be off from them (the Redis limiter's
   * fallback before Redis ever answered). Then a window begins with what this instance admitted in the one
   * before as counted: however far off its clock, no window of the true clock sees more than the limit from it.
   */
  unanchored?: () => boolean;
}

export class MemoryRateLimiter implements RateLimiter {
  /**
   * Key: subject. A decision costs one lookup and no key text is built. Stale subjects are swept once a
   * minute of traffic.
   */
  readonly #subjects = new Map<string, SubjectCounts>();
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
    const counts = this.#countsOf(subject, limits);
    const counters = counts.counters;
    let allowed = true;
    for (let i = 0; i < limits.length; i++) {
      const w = limits[i]!;
      const c = counters[i]!;
      if (c.name !== w.name) begin(c, w, nowMs, elapsed, 0);
      else if (c.endsAtElapsed <= elapsed) this.#next(c, w, nowMs, elapsed);
      if (c.own + c.others >= w.limit) allowed = false;
    }
    if (allowed && count) {
      for (const c of counters) c.own++;
      counts.unsynced = true;
      counts.changes++;
    }
    return decisionOf(
      limits,
      counters.map((c) => shownEnd(c, nowMs, elapsed) - (c.end - c.start)),
      allowed,
      counters.map((c, i) => limits[i]!.limit - c.own - c.others),
      nowMs,
    );
  }

  /**
   * After a window has ended in real time: the wall clock's window now, unless the clock was stepped back
   * to this window or before it within its length of real time, which would reopen it; then it goes on,
   * counts kept, until that length has passed since it began.
   */
  #next(c: Counter, w: WindowLimit, nowMs: number, elapsed: number): void {
    if (windowStart(nowMs, w.windowMs) <= c.start && elapsed < c.begunAtElapsed + w.windowMs) {
      c.endsAtElapsed = c.begunAtElapsed + w.windowMs;
      return;
    }
    // Unanchored, the window before is counted into this one while less than a length has passed since it ended.
    const carried = this.#unanchored() && elapsed - c.endsAtElapsed < w.windowMs ? c.own : 0;
    begin(c, w, nowMs, elapsed, carried);
  }

  /**
   * Takes Redis's answer for the subject: each window's start, its total and this instance's part of it,
   * and `counted` (what that answer admitted here). Returns whether Redis's part for this instance differs
   * from what it admitted (a write of another time, or lost counts): then it is marked unsynced.
   */
  observe(
    subject: string,
    limits: readonly WindowLimit[],
    starts: readonly number[],
    totals: readonly number[],
    owns: readonly number[],
    counted: number,
    nowMs: number,
  ): boolean {
    const elapsed = this.#clock.elapsed();
    if (elapsed >= this.#nextSweepElapsed) this.#sweep(elapsed);
    const counts = this.#countsOf(subject, limits);
    let differs = false;
    for (let i = 0; i < limits.length; i++) {
      const w = limits[i]!;
      const c = counts.counters[i]!;
      if (c.name === w.name && c.start > starts[i]!) continue; // this instance has moved on already
      if (c.name !== w.name || c.start !== starts[i]) {
        c.name = w.name;
        c.start = starts[i]!;
        c.end = c.start + w.windowMs;
        c.begunAtElapsed = elapsed;
        c.own = 0;
      }
      c.endsAtElapsed = elapsed + c.end - nowMs;
      c.own += counted;
      c.others = Math.max(0, totals[i]! - owns[i]!);
      if (owns[i] !== c.own) differs = true;
    }
    if (differs) counts.unsynced = true;
    return differs;
  }

  /**
   * The windows' own clock is first known (Redis's, read before the first raise): every counter begun by this
   * instance's wall clock is renamed to the window that clock names at nowMs, keeping what this instance admitted
   * within a window's length of real time (its own count and what was carried into it; that of a counter ended
   * less than its length ago), so that its next raise puts those admissions in Redis's current window. Wherever
   * its clock was, no window of Redis's then sees more than the limit from it.
   */
  anchor(nowMs: number): void {
    const elapsed = this.#clock.elapsed();
    for (const counts of this.#subjects.values()) {
      for (const c of counts.counters) {
        const windowMs = c.end - c.start;
        const live = c.endsAtElapsed > elapsed;
        const own = live ? c.own + c.others : elapsed - c.endsAtElapsed < windowMs ? c.own : 0;
        c.start = windowStart(nowMs, windowMs);
        c.end = c.start + windowMs;
        c.begunAtElapsed = elapsed;
        c.endsAtElapsed = elapsed + c.end - nowMs;
        c.own = own;
        c.others = 0;
      }
      counts.unsynced = true;
      counts.changes++;
    }
  }

  /** Takes `delta` from this instance's own count in the windows that still start at `starts` (a block handed back). */
  adjustOwn(subject: string, starts: readonly number[], delta: number): void {
    const counts = this.#subjects.get(subject);
    if (counts === undefined) return;
    counts.counters.forEach((c, i) => {
      if (c.start === starts[i]) c.own = Math.max(0, c.own + delta);
    });
  }

  /** Marks the subject's counts as maybe not in Redis (an answer that never came). */
  markUnsynced(subject: string): void {
    const counts = this.#subjects.get(subject);
    if (counts === undefined) return;
    counts.unsynced = true;
    counts.changes++;
  }

  /** How many subjects' counters and marks it holds: what its memory grows with, bounded by the sweep. */
  get size(): number {
    return this.#subjects.size + this.#marks.size;
  }

  /** Every subject whose windows have not all ended. */
  *current(): Generator<[subject: string, counts: SubjectCounts]> {
    const elapsed = this.#clock.elapsed();
    for (const entry of this.#subjects) if (entry[1].counters.some((c) => c.endsAtElapsed > elapsed)) yield entry;
  }

  async close(): Promise<void> {
    this.#subjects.clear();
    this.#marks.clear();
  }

  #countsOf(subject: string, limits: readonly WindowLimit[]): SubjectCounts {
    let counts = this.#subjects.get(subject);
    if (counts === undefined || counts.counters.length !== limits.length) {
      const counters = limits.map(() => ({ name: '', start: -1, end: 0, begunAtElapsed: 0, endsAtElapsed: -Infinity, own: 0, others: 0 }));
      counts = { counters, unsynced: false, changes: 0 };
      this.#subjects.set(subject, counts);
    }
    return counts;
  }

  #sweep(elapsed: number): void {
    this.#nextSweepElapsed = elapsed + MINUTE_MS;
    // A subject is kept until none of its windows can go on: a clock stepped back continues a window until its
    // length since it began (#next), so forgetting it at its end would reopen it. Unanchored, a window's length
    // past its end, as the next window begins with what it admitted.
    const kept = this.#unanchored()
      ? (c: Counter) => c.endsAtElapsed + c.end - c.start
      : (c: Counter) => Math.max(c.endsAtElapsed, c.begunAtElapsed + c.end - c.start);
    for (const [subject, counts] of this.#subjects) if (counts.counters.every((c) => kept(c) <= elapsed)) this.#subjects.delete(subject);
    for (const [subject, m] of this.#marks) if (m.endsAtElapsed <= elapsed) this.#marks.delete(subject);
  }
}
