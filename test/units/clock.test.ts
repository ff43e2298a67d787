/**
 * The bounded wall clock behind Idempotency-Key claims (src/domain/clock.ts): its readings are whole
 * milliseconds, as the stores' bigint columns need, and real time bounds them when the wall clock steps.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { BoundedWallClock, systemClock } from '../../src/domain/clock.ts';
import { FakeClock } from '../support/fake-clock.ts';

describe('BoundedWallClock', () => {
  test('readings are whole milliseconds on the system clock, whose elapsed readings are fractional', async () => {
    const wall = new BoundedWallClock(systemClock);
    for (let i = 0; i < 20; i++) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      assert.ok(Number.isInteger(wall.latest()) && Number.isInteger(wall.earliest()), `${wall.latest()} ${wall.earliest()}`);
    }
  });

  test('a wall clock stepped forward is followed by latest only, one stepped back by earliest only', () => {
    const clock = new FakeClock();
    const wall = new BoundedWallClock(clock);
    const t0 = clock.now();
    clock.advance(1000);
    assert.deepEqual([wall.latest(), wall.earliest()], [t0 + 1000, t0 + 1000], 'both follow a clock that runs true');
    clock.step(86_400_000);
    assert.deepEqual([wall.latest(), wall.earliest()], [t0 + 86_401_000, t0 + 1000]);
    clock.step(-86_400_000 - 3_600_000);
    assert.deepEqual([wall.latest(), wall.earliest()], [t0 + 1000, t0 + 1000 - 3_600_000]);
  });
});

describe('systemClock', () => {
  test('elapsed readings agree across the threads of the process, whenever each thread started', async () => {
    await new Promise((resolve) => setTimeout(resolve, 200)); // this thread has run a while before the worker starts
    const module = new URL('../../src/domain/clock.ts', import.meta.url).href;
    const worker = new Worker(
      `import(${JSON.stringify(module)}).then(({ systemClock }) => require('node:worker_threads').parentPort.postMessage(systemClock.elapsed()));`,
      { eval: true },
    );
    const before = systemClock.elapsed();
    const [theirs] = (await once(worker, 'message')) as [number];
    const after = systemClock.elapsed();
    await worker.terminate();
    assert.ok(theirs >= before && theirs <= after, `${before} <= ${theirs} <= ${after}`);
  });
});
