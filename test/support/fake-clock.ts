/** The clock in-process tests move by hand (src/domain/clock.ts). */
import type { Clock } from '../../src/domain/clock.ts';

/**
 * A clock the test moves. Setting `ms` or `advance` lets real time pass (both readings move); `step` moves
 * the wall clock alone, as NTP stepping it would.
 */
export class FakeClock implements Clock {
  #ms: number;
  #elapsedMs = 0;
  constructor(ms: number = Date.UTC(2026, 10, 22, 12, 0, 0)) {
    this.#ms = ms;
  }
  get ms(): number {
    return this.#ms;
  }
  set ms(ms: number) {
    this.#elapsedMs += ms - this.#ms;
    this.#ms = ms;
  }
  now(): number {
    return this.#ms;
  }
  elapsed(): number {
    return this.#elapsedMs;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  /** The wall clock stepped forward (or back, with a negative ms) while no time passes. */
  step(ms: number): void {
    this.#ms += ms;
  }
}
