/** What the in-process limiter's unit tests share: a moment windows start at, a key's two windows, a limiter on a hand-moved clock. */
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import type { WindowLimit } from '../../src/limits/limiter.ts';
import { MemoryRateLimiter } from '../../src/limits/memory.ts';
import { FakeClock } from './fake-clock.ts';

/** 12:00:00 UTC on a day: a minute and a day start here. */
export const NOON = Date.UTC(2026, 10, 22, 12, 0, 0);

/** A key's limits: so many a minute and so many a day. */
export const limitsOf = (perMinute: number, perDay: number): WindowLimit[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];

/** An in-process limiter whose clock starts at startMs and moves when the test moves it. */
export function memoryLimiter(startMs = NOON) {
  const clock = new FakeClock(startMs);
  return { clock, limiter: new MemoryRateLimiter({ clock }) };
}
