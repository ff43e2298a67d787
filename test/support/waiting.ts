/**
 * Waiting for what other processes do: a change made through one instance or the CLI reaches a
 * server some time later, within a promised bound, so tests poll for it up to that bound.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** Polls check every everyMs until it passes, failing past withinMs; returns how long it took. */
export async function eventually(check: () => Promise<boolean>, withinMs: number, everyMs = 200): Promise<number> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > withinMs) throw new Error(`not within ${withinMs} ms`);
    await sleep(everyMs);
  }
  return Date.now() - start;
}

/** Whether a promise has settled, read at any moment. */
export function settledFlag(promise: Promise<unknown>): () => boolean {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return () => settled;
}
