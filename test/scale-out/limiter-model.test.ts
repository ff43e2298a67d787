/**
 * The shared limiter against its reference model (test/support/limit-model.ts): three limiter instances on a
 * Redis of the test's own, driven through random sequences of requests from several subjects, with Redis paused
 * (SIGSTOP), slow (DEBUG SLEEP), restarted empty and refusing writes (maxmemory), instances ended and started
 * again, and the clock moving on. Every window is held to the model: never more than its bound, no refusal
 * below the limit that faults do not explain, and Redis never holding more than was admitted (nothing counted
 * twice), exactly what was admitted where no fault reached. The instances follow one fake clock, which the
 * scripts follow too, so a run covers many windows in seconds.
 *
 * Seeded: each run prints its seed; PETSTORE_MODEL_SEED=N replays one, PETSTORE_MODEL_RUNS=N sets how many
 * sequences run (4 by default, about a minute); `node scripts/limiter-model.ts SEED SECONDS` runs longer.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import { windowStart, type WindowLimit } from '../../src/limits/limiter.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createTestRedisLimiter, newKeyPrefix } from '../support/engines.ts';
import { degraded as degradedOf, fallbacks as fallbacksOf } from '../support/limiter-metrics.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { LimitModel, type WindowRecord } from '../support/limit-model.ts';
import { startRedis, type RedisProcess } from '../support/redis-servers.ts';
import { countedIn, windowKey } from '../support/shared-counts.ts';
import { suiteOwner, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const LIMITS: WindowLimit[] = [
  { name: 'minute', limit: 8, windowMs: MINUTE_MS },
  { name: 'day', limit: 40, windowMs: DAY_MS },
];
const SUBJECTS = ['key:a', 'key:b'];
const INSTANCES = 3;
const TIMEOUT_MS = 250;

type Fault = 'none' | 'pause' | 'slow' | 'empty' | 'refuse' | 'restart';
interface Step {
  fault: Fault;
  /** Requests made during the fault: [instance, subject] each, some at once. */
  requests: [number, number][];
  together: boolean;
  /** How far the clock moves after the step (ms); 0 for most. */
  advanceMs: number;
  instance: number;
  faultMs: number;
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  fault: fc.constantFrom<Fault>('none', 'none', 'none', 'pause', 'slow', 'empty', 'refuse', 'restart'),
  requests: fc.array(fc.tuple(fc.nat(INSTANCES - 1), fc.nat(SUBJECTS.length - 1)), { minLength: 1, maxLength: 12 }),
  together: fc.boolean(),
  advanceMs: fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1_000, max: 70_000 })),
  instance: fc.nat(INSTANCES - 1),
  faultMs: fc.integer({ min: 300, max: 1_200 }),
});

describe('the shared limiter against its model', () => {
  const suite = suiteOwner();
  const dir = tempDir(suite);
  let redis: RedisProcess;
  let admin: Redis;

  before(async () => {
    redis = await startRedis(dir, 'model', ['enable-debug-command yes']);
    admin = new Redis(redis.port, '127.0.0.1');
    admin.on('error', () => undefined);
  });
  after(async () => {
    admin.disconnect();
    await redis.kill();
  });

  /** One sequence of steps, on fresh instances and a fresh prefix; throws on the first window that breaks the model. */
  async function run(steps: Step[]): Promise<void> {
    const clock = new FakeClock(Date.UTC(2030, 0, 15, 10, 30, 5));
    const prefix = newKeyPrefix();
    const model = new LimitModel();
    let generation = 0;
    const open = async () => {
      const metrics = createMetrics();
      const limiter = await createTestRedisLimiter({
        url: `redis://127.0.0.1:${redis.port}`,
        keyPrefix: prefix,
        clock,
        metrics,
        timeoutMs: TIMEOUT_MS,
        ...(process.env.MODEL_DEBUG ? { log: createLogger('info') } : {}),
      });
      return { limiter, metrics, name: `i${generation++}` };
    };
    const instances = await Promise.all(Array.from({ length: INSTANCES }, open));
    const starts = () => new Map(LIMITS.map((w) => [w.name, windowStart(clock.now(), w.windowMs)]));
    const request = async ([i, s]: [number, number]) => {
      const { limiter, metrics, name } = instances[i]!;
      const subject = SUBJECTS[s]!;
      const before = await fallbacksOf(metrics);
      const began = performance.now();
      const decision = await limiter.consume(subject, LIMITS);
      const late = performance.now() - began > TIMEOUT_MS;
      const inMemory = (await fallbacksOf(metrics)) > before;
      const records = LIMITS.map((w) => model.window(subject, w.name, windowStart(decision.nowMs, w.windowMs), w.limit));
      for (const record of records) {
        if (late) record.late++;
        if (inMemory) record.inMemory.add(name);
      }
      if (decision.allowed) for (const record of records) record.admitted.set(name, (record.admitted.get(name) ?? 0) + 1);
      else {
        const refusing = decision.windows.findIndex((w) => w.remaining === 0);
        return records[refusing === -1 ? 0 : refusing]!;
      }
      return undefined;
    };
    // A refusal is judged by what its window had admitted once it was answered: for requests sent together,
    // once all are (which ran first in Redis is not the order the answers are read in).
    const requests = async (step: Step) => {
      const judge = (refused: (WindowRecord | undefined)[]) => {
        for (const record of refused) record?.refusals.push({ admittedThen: record.total, lateThen: record.late });
      };
      if (step.together) judge(await Promise.all(step.requests.map(request)));
      else for (const r of step.requests) judge([await request(r)]);
    };
    try {
      for (const step of steps) {
        if (step.fault !== 'none') model.fault(starts());
        switch (step.fault) {
          case 'none':
            await requests(step);
            break;
          case 'pause':
            redis.child.kill('SIGSTOP');
            await Promise.all([requests(step), sleep(step.faultMs)]);
            redis.child.kill('SIGCONT');
            break;
          case 'slow': {
            const asleep = admin.call('DEBUG', 'SLEEP', String(step.faultMs / 1000)).catch(() => undefined);
            await sleep(20);
            await Promise.all([requests(step), asleep]);
            break;
          }
          case 'empty':
            await redis.kill();
            redis = await startRedis(dir, 'model', ['enable-debug-command yes'], false, redis.port);
            model.emptied(starts());
            await requests(step);
            break;
          case 'refuse':
            await admin.config('SET', 'maxmemory', '1');
            await requests(step);
            await admin.config('SET', 'maxmemory', '0');
            break;
          case 'restart': {
            const ending = instances[step.instance]!;
            await ending.limiter.close();
            model.ended(ending.name);
            instances[step.instance] = await open();
            await requests(step);
            break;
          }
        }
        if (step.advanceMs > 0) clock.advance(step.advanceMs);
      }
      // Healed: every instance back on Redis, and anything Redis had queued has run.
      await eventually(async () => (await Promise.all(instances.map((i) => degradedOf(i.metrics)))).every((d) => d === 0), 15_000, 100);
      await sleep(300);
      for (const [key, record] of model.entries()) {
        const [subject, name] = key.split('|') as [string, string];
        assert.ok(record.total <= record.bound(), `${key}: ${record.total} admitted, above the bound of ${record.bound()}`);
        assert.deepEqual(record.unearnedRefusals(), [], `${key}: refused below the limit (${record.total} admitted in all)`);
        if (starts().get(name) !== record.start) continue;
        const counted = await countedIn(admin, windowKey(prefix, subject, name));
        assert.ok(counted <= record.total, `${key}: Redis holds ${counted} for ${record.total} admitted: counted twice`);
        if (!record.faulted) assert.equal(counted, record.total, `${key}: Redis holds what was admitted`);
      }
    } finally {
      redis.child.kill('SIGCONT');
      await admin.config('SET', 'maxmemory', '0').catch(() => undefined);
      await Promise.all(instances.map((i) => i.limiter.close()));
    }
  }

  test(
    'random sequences of requests and faults keep every window to the model',
    { timeout: Number(process.env.PETSTORE_MODEL_RUNS ?? 4) * 20_000 + MINUTE_MS },
    async () => {
      const seed = Number(process.env.PETSTORE_MODEL_SEED ?? Math.floor(Math.random() * 2 ** 31));
      const numRuns = Number(process.env.PETSTORE_MODEL_RUNS ?? 4);
      console.log(`limiter model: seed ${seed}, ${numRuns} sequences (PETSTORE_MODEL_SEED=${seed} replays them)`);
      await fc.assert(
        fc.asyncProperty(fc.array(stepArb, { minLength: 4, maxLength: 14 }), (steps) => run(steps)),
        { seed, numRuns, endOnFailure: true, path: process.env.PETSTORE_MODEL_PATH },
      );
    },
  );
});
