/**
 * Rate limiting contract. A subject (an API key id, or a client address for requests without a valid
 * key) has one or more windows; a request is admitted only when every window has room, and only an
 * admitted request is counted, so refused requests never consume quota.
 *
 * Windows are fixed and aligned to the Unix epoch: the minute window resets at every whole UTC minute
 * and the day window at UTC midnight. Fixed windows make limits exact and cheap to count (one counter
 * per window, atomic in Redis with one script), and their reset instants are the same for every
 * instance, which is what X-RateLimit-Reset and Retry-After promise.
 */

export interface WindowLimit {
  /** Name used in the RateLimit-Policy field, e.g. "minute". */
  name: string;
  limit: number;
  windowMs: number;
}

export interface WindowState {
  name: string;
  limit: number;
  windowMs: number;
  /** Requests still admitted in this window after this decision. */
  remaining: number;
  /** Epoch milliseconds when the window resets. */
  resetAtMs: number;
}

export interface LimitDecision {
  allowed: boolean;
  windows: WindowState[];
  /** The limits decided on: the same array for every decision on a subject's limits, so what is made of them alone can be kept. */
  limits: readonly WindowLimit[];
}

export interface RateLimiter {
  /** Admits and counts the request if every window has room; otherwise counts nothing. */
  consume(subject: string, limits: readonly WindowLimit[], nowMs: number): Promise<LimitDecision>;
  /**
   * consume's decision when it can be taken at once, from this process's memory, counted the same
   * way; undefined (and nothing counted) when only consume can decide, having to ask Redis.
   */
  consumeNow(subject: string, limits: readonly WindowLimit[], nowMs: number): LimitDecision | undefined;
  /** The windows' state without counting anything: for answers that must not use quota (bans). */
  peek(subject: string, limits: readonly WindowLimit[], nowMs: number): Promise<LimitDecision>;
  /**
   * When the subject was first marked within the last `periodMs`: `nowMs` when this is the first mark
   * (which starts a new period), or the moment of the mark that started the current period.
   */
  firstMark(subject: string, nowMs: number, periodMs: number): Promise<number>;
  close(): Promise<void>;
}

export function windowStart(nowMs: number, windowMs: number): number {
  return nowMs - (nowMs % windowMs);
}

/** A decision on `limits`, from each window's start and what it has left (floored at 0). */
export function decisionOf(
  limits: readonly WindowLimit[],
  starts: readonly number[],
  allowed: boolean,
  remaining: readonly number[],
): LimitDecision {
  return {
    allowed,
    limits,
    windows: limits.map((w, i) => ({
      name: w.name,
      limit: w.limit,
      windowMs: w.windowMs,
      remaining: Math.max(0, remaining[i]!),
      resetAtMs: starts[i]! + w.windowMs,
    })),
  };
}
