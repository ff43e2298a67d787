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
import type { SharedTable } from './shared-table.ts';
import { AS_RECORDED, LimiterFullError, SubjectRecords, type Counter, type SubjectCounts } from './subject-records.ts';

export type { Counter, SubjectCounts } from './subject-records.ts';

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
  /** The table the counts are kept in, shared by every thread of the process handed it; one of its own by default. */
  table?: SharedTable;
}

export class MemoryRateLimiter implements RateLimiter {
  /** By subject, with the first mark of each subject's current period (see firstMark). Stale ones are swept once a minute of traffic. */
  readonly #records: SubjectRecords;
  readonly #clock: Clock;
  readonly #unanchored: () => boolean;
  #nextSweepElapsed = 0;
  #lastFullSweepElapsed = -Infinity;

  constructor(options: MemoryLimiterOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#unanchored = options.unanchored ?? (() => false);
    this.#records = new SubjectRecords(options.table);
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
    const mark = () => this.#records.mark(subject, elapsed, elapsed + untilMs - nowMs);
    return nowMs - (elapsed - this.#withRoom(mark, elapsed));
  }

  /** Synchronous, hence atomic: also what the Redis limiter falls back to when Redis is unreachable. */
  decide(subject: string, limits: readonly WindowLimit[], nowMs: number, count: boolean): LimitDecision {
    const elapsed = this.#clock.elapsed();
    if (elapsed >= this.#nextSweepElapsed) this.#sweep(elapsed);
    const counts = this.#withRoom(() => this.#records.open(subject, limits.length, true), elapsed);
    let allowed = true;
    let starts: number[], remaining: number[];
    try {
      const counters = counts.counters;
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
      this.#records.save(counts);
      starts = counters.map((c) => shownEnd(c, nowMs, elapsed) - (c.end - c.start));
      remaining = counters.map((c, i) => limits[i]!.limit - c.own - c.others);
    } finally {
      this.#records.close();
    }
    return decisionOf(limits, starts, allowed, remaining, nowMs);
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
    const counts = this.#withRoom(() => this.#records.open(subject, limits.length, true), elapsed);
    let differs = false;
    try {
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
      this.#records.save(counts);
    } finally {
      this.#records.close();
    }
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
    for (const subject of this.#records.subjects()) {
      this.#update(subject, (counts) => {
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
      });
    }
  }

  /** Takes `delta` from this instance's own count in the windows that still start at `starts` (a block handed back). */
  adjustOwn(subject: string, starts: readonly number[], delta: number): void {
    this.#update(subject, (counts) =>
      counts.counters.forEach((c, i) => {
        if (c.start === starts[i]) c.own = Math.max(0, c.own + delta);
      }),
    );
  }

  /** Marks the subject's counts as maybe not in Redis (an answer that never came). */
  markUnsynced(subject: string): void {
    this.#update(subject, (counts) => {
      counts.unsynced = true;
      counts.changes++;
    });
  }

  /** Marks the subject's counts as in Redis, unless they changed since `changes` was read (a raise sent them). */
  markSynced(subject: string, changes: number): void {
    this.#update(subject, (counts) => {
      if (counts.changes === changes) counts.unsynced = false;
    });
  }

  /** How many subjects' counters and marks it holds: what its memory grows with, bounded by the sweep. */
  get size(): number {
    return this.#records.size;
  }

  /** Every subject whose windows have not all ended. */
  *current(): Generator<[subject: string, counts: SubjectCounts]> {
    const elapsed = this.#clock.elapsed();
    for (const entry of this.#records.all()) if (entry[1].counters.some((c) => c.endsAtElapsed > elapsed)) yield entry;
  }

  async close(): Promise<void> {
    this.#records.clear();
  }

  /** Runs `change` on the subject's counts, whatever its windows, if it has any. */
  #update(subject: string, change: (counts: SubjectCounts) => void): void {
    const counts = this.#records.open(subject, AS_RECORDED, false);
    if (counts === undefined) return;
    try {
      change(counts);
      this.#records.save(counts);
    } finally {
      this.#records.close();
    }
  }

  /**
   * `make`'s record; when the table has no room, once the ended records are swept (at most once a second,
   * so that a flood of new subjects at a full table does not sweep on every request).
   */
  #withRoom<T>(make: () => T, elapsed: number): T {
    try {
      return make();
    } catch (err) {
      if (!(err instanceof LimiterFullError) || elapsed < this.#lastFullSweepElapsed + 1000) throw err;
      this.#lastFullSweepElapsed = elapsed;
      this.#sweep(elapsed);
      return make();
    }
  }

  #sweep(elapsed: number): void {
    this.#nextSweepElapsed = elapsed + MINUTE_MS;
    // A subject is kept until none of its windows can go on: a clock stepped back continues a window until its
    // length since it began (#next), so forgetting it at its end would reopen it. Unanchored, a window's length
    // past its end, as the next window begins with what it admitted.
    const kept = this.#unanchored()
      ? (c: Counter) => c.endsAtElapsed + c.end - c.start
      : (c: Counter) => Math.max(c.endsAtElapsed, c.begunAtElapsed + c.end - c.start);
    this.#records.sweep((counts) => counts.counters.some((c) => kept(c) > elapsed), elapsed);
  }
}
