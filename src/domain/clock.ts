/**
 * The two clocks (docs/reliability.md, "A clock that jumps"). The wall clock names instants that other processes
 * read (windows' and bans' ends, key expiries, claims' ages) and may be stepped forward or back; every length of
 * time this process waits or keeps something for is measured on the elapsed clock, which is never stepped.
 */
export interface Clock {
  /** Epoch milliseconds by the wall clock. */
  now(): number;
  /** Milliseconds of real time since an arbitrary origin: never stepped, what durations are measured on. */
  elapsed(): number;
}

export const systemClock: Clock = { now: () => Date.now(), elapsed: () => performance.now() };

/**
 * Two readings of the wall clock that real time bounds, for what an instant decides to keep or forget:
 * `latest` never trails real time since the first reading (a clock stepped back is not followed), `earliest`
 * never runs ahead of it (a clock stepped forward is not followed). Each follows the wall clock while it runs
 * true. What is forgotten before `earliest` and stamped with `latest` is so never forgotten early.
 */
export class BoundedWallClock {
  readonly #clock: Clock;
  /** A wall reading and the elapsed reading taken with it, from the first call. */
  readonly #anchor: { wallMs: number; elapsedMs: number };

  constructor(clock: Clock) {
    this.#clock = clock;
    this.#anchor = { wallMs: clock.now(), elapsedMs: clock.elapsed() };
  }

  /** The wall clock as real time since the anchor carries it forward, in whole milliseconds as the wall clock is. */
  #carried(): number {
    return this.#anchor.wallMs + Math.floor(this.#clock.elapsed() - this.#anchor.elapsedMs);
  }

  latest(): number {
    return Math.max(this.#clock.now(), this.#carried());
  }

  earliest(): number {
    return Math.min(this.#clock.now(), this.#carried());
  }
}
