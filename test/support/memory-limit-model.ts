/**
 * A pure reference model of the in-process limiter and the temporary bans, as docs/rate-limits.md states
 * their rules, in the two clocks they are stated in: the wall clock (`wall`, which names windows and is
 * stepped either way) and real time (`real`, which bounds every window and ban). The property test in
 * test/units/limits-model.test.ts holds the real ones to it decision by decision, and checks the model's
 * own trace against the promises (periods within their length and limit, none reopened within its length).
 */

/** One counting period of a window: named by the wall clock's window it began in, bounded by real time. */
export interface Period {
  /** The start of the wall clock's window it counts (epoch ms). */
  label: number;
  /** When it began counting and when it ends, in real time. */
  begunAt: number;
  endsAt: number;
  count: number;
}

/** One window (a length and a limit) of one subject: every period it has counted, the current one last. */
export class ModelWindow {
  readonly periods: Period[] = [];
  readonly limit: number;
  readonly windowMs: number;

  constructor(limit: number, windowMs: number) {
    this.limit = limit;
    this.windowMs = windowMs;
  }

  /** The period a decision at `wall` and `real` counts in. */
  periodAt(wall: number, real: number): Period {
    const last = this.periods.at(-1);
    if (last !== undefined && real < last.endsAt) return last;
    const label = wall - (wall % this.windowMs);
    // A clock stepped back to the period's window or before it: the period goes on to its length since it began.
    if (last !== undefined && label <= last.label && real < last.begunAt + this.windowMs) {
      last.endsAt = last.begunAt + this.windowMs;
      return last;
    }
    // Otherwise the wall clock's window now, from now until its end by that clock.
    const next = { label, begunAt: real, endsAt: real + label + this.windowMs - wall, count: 0 };
    this.periods.push(next);
    return next;
  }
}

export interface ModelDecision {
  allowed: boolean;
  /** Per window: what is left after this decision, and the real time until its period ends. */
  remaining: number[];
  leftMs: number[];
}

/** A subject's windows: a request is admitted only when every window has room, and only an admitted one counts. */
export class ModelSubject {
  readonly windows: ModelWindow[];

  constructor(limits: readonly { limit: number; windowMs: number }[]) {
    this.windows = limits.map((w) => new ModelWindow(w.limit, w.windowMs));
  }

  decide(wall: number, real: number): ModelDecision {
    const periods = this.windows.map((w) => w.periodAt(wall, real));
    const allowed = periods.every((p, i) => p.count < this.windows[i]!.limit);
    if (allowed) for (const p of periods) p.count++;
    return {
      allowed,
      remaining: periods.map((p, i) => this.windows[i]!.limit - p.count),
      leftMs: periods.map((p) => p.endsAt - real),
    };
  }
}

export interface ModelBanPolicy {
  threshold: number;
  graceMs: number;
  durationMs: number;
}

const MINUTE = 60_000;

/**
 * Bans: a refusal counts when it comes at least the grace after the first refusal of its mark (one per key and
 * refusing window); the threshold-th counted in a minute period bans until the next whole second past the
 * duration. The instance that placed a ban holds it that long in real time; one that reads it from the store
 * (after a restart, or another worker of the process) believes at most one duration from its first read.
 */
export class BanModel {
  /** Each key's stored ban end (wall ms): what outlives a restart. */
  readonly #stored = new Map<string, number>();
  /** This incarnation's view of each key's ban, by worker and key (`worker:key`), from its first read or its placement. */
  readonly #known = new Map<string, { stored: number; endsAt: number }>();
  /** Each mark's first refusal and when its period ends, in real time. */
  readonly #marks = new Map<string, { at: number; endsAt: number }>();
  /** The counted refusals of each key, in minute periods. */
  readonly #counted = new Map<string, ModelSubject>();
  readonly #policy: ModelBanPolicy;

  constructor(policy: ModelBanPolicy) {
    this.#policy = policy;
  }

  /** A restart: what was in memory is gone, the store stays. */
  restart(): void {
    this.#known.clear();
    this.#marks.clear();
    this.#counted.clear();
  }

  /** The real time left of the key's ban, or undefined when it is not banned. */
  bannedFor(key: string, wall: number, real: number, worker = 0): number | undefined {
    let known = this.#known.get(`${worker}:${key}`);
    const stored = this.#stored.get(key) ?? 0;
    // A worker that knew an older ban (or none) reads the store again, as its cache at 0 makes it.
    if (known === undefined || known.stored !== stored) {
      known = { stored, endsAt: real + Math.min(stored, wall + this.#policy.durationMs) - wall };
      this.#known.set(`${worker}:${key}`, known);
    }
    const left = known.endsAt - real;
    return known.stored !== 0 && left > 0 ? left : undefined;
  }

  /** Counts a refusal of the key, refused for `mark`'s window (ending at `untilWall`); the ban's stored end when it bans. */
  refusal(key: string, mark: string, untilWall: number, wall: number, real: number, worker = 0): number | undefined {
    let first = this.#marks.get(mark);
    if (first === undefined || first.endsAt <= real) {
      first = { at: real, endsAt: real + untilWall - wall };
      this.#marks.set(mark, first);
    }
    if (this.#policy.graceMs > 0 && real - first.at < this.#policy.graceMs) return undefined;
    let counted = this.#counted.get(key);
    if (counted === undefined) this.#counted.set(key, (counted = new ModelSubject([{ limit: this.#policy.threshold, windowMs: MINUTE }])));
    const decision = counted.decide(wall, real);
    if (!decision.allowed || decision.remaining[0]! > 0) return undefined;
    const end = Math.ceil((wall + this.#policy.durationMs) / 1000) * 1000;
    this.#stored.set(key, end);
    this.#known.set(`${worker}:${key}`, { stored: end, endsAt: real + end - wall });
    return end;
  }
}
