/**
 * The rate-limiting contract: a subject (a key's subject, or a client address) has fixed UTC windows; a request
 * is admitted only when every window has room, and only admitted ones count (docs/rate-limits.md). Each limiter
 * decides by its own clock (the Redis one by Redis's); all answered about a decision counts from its moment.
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
  /** The moment decided at, by the limiter's clock (epoch ms). */
  nowMs: number;
}

export interface RateLimiter {
  /** The limiter's clock (epoch ms): windows start and end by it. */
  now(): number;
  /** Admits and counts the request if every window has room; otherwise counts nothing. */
  consume(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision>;
  /**
   * consume's decision when it can be taken at once, from this process's memory, counted the same
   * way; undefined (and nothing counted) when only consume can decide, having to ask Redis.
   */
  consumeNow(subject: string, limits: readonly WindowLimit[]): LimitDecision | undefined;
  /** The windows' state without counting anything: for answers that must not use quota (bans). */
  peek(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision>;
  /**
   * When the subject was first marked in the period that ends at `untilMs`: the moment of this mark
   * when it is the first (which starts the period), else the moment of the first. A mark names its
   * period by its subject; `untilMs` only bounds how long it is kept.
   */
  firstMark(subject: string, untilMs: number): Promise<number>;
  close(): Promise<void>;
}

/**
 * The window a decision is reported by and refused for: the one nearest exhaustion (the lowest
 * remaining count, a tie going to the longer window, the one that would keep a client waiting longer).
 */
export function nearestExhaustion(windows: readonly WindowState[]): WindowState {
  let chosen = windows[0]!;
  for (const w of windows) {
    if (w.remaining < chosen.remaining || (w.remaining === chosen.remaining && w.windowMs > chosen.windowMs)) chosen = w;
  }
  return chosen;
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
  nowMs: number,
): LimitDecision {
  return {
    allowed,
    limits,
    nowMs,
    windows: limits.map((w, i) => ({
      name: w.name,
      limit: w.limit,
      windowMs: w.windowMs,
      remaining: Math.max(0, remaining[i]!),
      resetAtMs: starts[i]! + w.windowMs,
    })),
  };
}
