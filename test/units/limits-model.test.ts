/**
 * The in-process limiter and the temporary bans against their reference model (test/support/memory-limit-model.ts):
 * random sequences of requests from several keys, real time passing (a moment, a minute, a day), the wall clock
 * stepped either way by up to a day and a restart, on a real SQLite store and a clock in the test's hand. Each
 * answer is the model's (admitted or refused, what is left, when it resets, banned and until when), and the
 * trace keeps the promises that do not depend on the model: a refusal only with the limit admitted within the
 * window's length of real time, no period longer than its window or above its limit and none reopened within
 * its length, a ban only at the threshold and past the grace, and none held past its duration (from its first
 * read after a restart).
 *
 * Seeded: the seed is printed; PETSTORE_MODEL_SEED=N replays it, PETSTORE_MODEL_RUNS=N sets how many sequences.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import fc from 'fast-check';
import { createKey } from '../../src/cli/keys.ts';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import { KeyBans, type BanPolicy } from '../../src/limits/bans.ts';
import { nearestExhaustion, type WindowLimit } from '../../src/limits/limiter.ts';
import { MemoryRateLimiter } from '../../src/limits/memory.ts';
import type { SharedTable } from '../../src/limits/shared-table.ts';
import { limiterTable } from '../../src/limits/subject-records.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { BanModel, ModelSubject } from '../support/memory-limit-model.ts';
import { tempDir } from '../support/temp.ts';

const LIMITS: WindowLimit[] = [
  { name: 'minute', limit: 4, windowMs: MINUTE_MS },
  { name: 'day', limit: 14, windowMs: DAY_MS },
];
const POLICY: BanPolicy = { threshold: 3, graceMs: 1000, durationMs: 5 * MINUTE_MS, cacheTtlMs: 2000 };
const KEYS = 3;
/** The most workers a sequence spreads its requests over (docs/workers.md): each its own limiter on the process's one table. */
const WORKERS = 3;

type Action =
  | { kind: 'requests'; key: number; worker: number; count: number; apartMs: number }
  | { kind: 'wait'; ms: number }
  | { kind: 'step'; ms: number }
  | { kind: 'restart' };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('requests'),
      key: fc.nat(KEYS - 1),
      worker: fc.nat(WORKERS - 1),
      count: fc.integer({ min: 1, max: 8 }),
      apartMs: fc.nat(700),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('wait'),
      ms: fc.oneof(
        fc.integer({ min: 1, max: 3_000 }),
        fc.integer({ min: 1, max: 2 * MINUTE_MS }),
        fc.integer({ min: 1, max: DAY_MS + MINUTE_MS }),
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('step'),
      ms: fc.oneof(fc.integer({ min: -90_000, max: 90_000 }), fc.integer({ min: -DAY_MS, max: DAY_MS }), fc.constantFrom(-DAY_MS, DAY_MS)),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'restart' as const }) },
);

/** What a request got, at which real time, on which incarnation (restarts before it): the trace the promises are checked on. */
type Outcome = 'admitted' | 'refused' | 'banned';
interface Event {
  key: number;
  real: number;
  outcome: Outcome;
  incarnation: number;
  /** Which worker's limiter and bans answered it. */
  worker: number;
}

/** A ban placed: by the refusal at `event` (its index in the trace). */
interface Placed {
  key: number;
  real: number;
  event: number;
  incarnation: number;
  /** Which worker's limiter and bans answered it. */
  worker: number;
}

/** The promises, checked on the trace alone; `firstReads` by `key@incarnation`: when that incarnation first read the key's ban. */
function checkTrace(events: Event[], bans: Placed[], firstReads: Map<string, number>) {
  const of = (key: number, outcome: Outcome, from: number, to: number) =>
    events.filter((e) => e.key === key && e.outcome === outcome && e.real > from && e.real <= to).length;
  events.forEach((e, index) => {
    if (e.outcome === 'refused') {
      const earned = LIMITS.some((w) => of(e.key, 'admitted', e.real - w.windowMs, e.real) >= w.limit);
      assert.ok(earned, `key ${e.key} refused at ${e.real} without the limit admitted within the window's length before`);
    }
    if (e.outcome === 'banned') {
      const placed = bans.filter((b) => b.key === e.key && b.event < index).at(-1);
      assert.ok(placed !== undefined, `key ${e.key} banned at ${e.real} with no ban placed`);
      // Another worker than the one that placed it reads it from the store: at most one duration from its first read since.
      const readAfter = events.find((r, i) => i > placed.event && r.key === e.key && r.worker === e.worker)!.real;
      const bound =
        placed.incarnation < e.incarnation
          ? firstReads.get(`${e.key}@${e.incarnation}@${e.worker}`)! + POLICY.durationMs
          : placed.worker === e.worker
            ? placed.real + POLICY.durationMs + 1000
            : Math.max(placed.real + POLICY.durationMs + 1000, readAfter + POLICY.durationMs);
      assert.ok(e.real < bound, `key ${e.key} still banned at ${e.real}, past ${bound} (placed at ${placed.real})`);
    }
  });
  for (const b of bans) {
    assert.ok(of(b.key, 'refused', b.real - MINUTE_MS, b.real) >= POLICY.threshold, `key ${b.key} banned at ${b.real} below the threshold`);
    const firstRefused = events.find((e) => e.key === b.key && e.outcome === 'refused' && e.incarnation === b.incarnation);
    assert.ok(firstRefused !== undefined && b.real - firstRefused.real >= POLICY.graceMs, `key ${b.key} banned within the grace`);
  }
}

/** Every period the model counted keeps its window's promises. */
function checkPeriods(subjects: Iterable<ModelSubject>) {
  for (const subject of subjects) {
    for (const w of subject.windows) {
      const begun = new Map<number, number>();
      for (const p of w.periods) {
        assert.ok(p.count <= w.limit, `a period counted ${p.count}, above ${w.limit}`);
        assert.ok(p.endsAt - p.begunAt <= w.windowMs, `a period of ${p.endsAt - p.begunAt} ms, longer than ${w.windowMs}`);
        const before = begun.get(p.label);
        assert.ok(
          before === undefined || p.begunAt - before >= w.windowMs,
          `window ${p.label} reopened ${p.begunAt - before!} ms after it began`,
        );
        begun.set(p.label, p.begunAt);
      }
    }
  }
}

/**
 * One sequence, on `workers` limiters sharing one table as a process's workers do (1: one thread). With several,
 * each worker has its bans' cache too; with `policy`'s cache at 0 they all read the store, so a ban placed by one
 * is the model's at once in every other (the process test holds the cache's bound).
 */
async function run(actions: Action[], dir: string, n: number, workers: number, policy: BanPolicy): Promise<void> {
  const store = openSqliteStore({ path: join(dir, `model-${n}.db`), synchronous: 'normal' });
  try {
    const ids = await Promise.all(
      Array.from({ length: KEYS }, async () => (await createKey(store, 'production', { plan: 'free' })).record.id),
    );
    const clock = new FakeClock(Date.UTC(2030, 0, 15, 23, 58, 30));
    const open = (table: SharedTable) =>
      Array.from({ length: workers }, () => {
        const limiter = new MemoryRateLimiter({ clock, table });
        return { limiter, bans: new KeyBans(store, limiter, clock, policy) };
      });
    let servers = open(limiterTable(1 << 20));
    let models = ids.map(() => new ModelSubject(LIMITS));
    const everyModel = [...models];
    const banModel = new BanModel(policy);
    const events: Event[] = [];
    const placed: Placed[] = [];
    let incarnation = 0;
    const firstReads = new Map<string, number>();

    const request = async (key: number, worker: number) => {
      const { limiter, bans } = servers[worker % workers]!;
      const id = ids[key]!;
      const wall = clock.now();
      const real = clock.elapsed();
      const where = `key ${key}, request ${events.length}, wall ${new Date(wall).toISOString()}, real ${real}`;
      const readAt = `${key}@${incarnation}@${worker % workers}`;
      if (!firstReads.has(readAt)) firstReads.set(readAt, real);
      const bannedUntil = await bans.bannedUntil(id, wall);
      const bannedFor = banModel.bannedFor(id, wall, real, worker % workers);
      assert.equal(bannedUntil === undefined ? undefined : bannedUntil - wall, bannedFor, `${where}: banned for`);
      if (bannedFor !== undefined) return void events.push({ key, real, outcome: 'banned', incarnation, worker: worker % workers });
      const decision = limiter.consumeNow(`key:${id}`, LIMITS);
      const expected = models[key]!.decide(wall, real);
      assert.equal(decision.allowed, expected.allowed, `${where}: admitted`);
      decision.windows.forEach((w, i) => {
        assert.equal(w.remaining, expected.remaining[i], `${where}: ${w.name} remaining`);
        // The reset told is when the period ends, to within the second the wall clock's own edge may differ by.
        assert.ok(
          Math.abs(w.resetAtMs - wall - expected.leftMs[i]!) < 1000,
          `${where}: ${w.name} resets in ${w.resetAtMs - wall}, not ${expected.leftMs[i]}`,
        );
      });
      events.push({ key, real, outcome: decision.allowed ? 'admitted' : 'refused', incarnation, worker: worker % workers });
      if (decision.allowed) return;
      const refusing = nearestExhaustion(decision.windows);
      const mark = `refusals:${id}:${refusing.name}:${refusing.resetAtMs}`;
      const end = await bans.recordRefusal(id, decision);
      assert.equal(end, banModel.refusal(id, mark, refusing.resetAtMs, wall, real, worker % workers), `${where}: the ban placed`);
      if (end !== undefined) placed.push({ key, real, event: events.length - 1, incarnation, worker: worker % workers });
    };

    for (const action of actions) {
      switch (action.kind) {
        case 'requests':
          for (let i = 0; i < action.count; i++) {
            await request(action.key, action.worker);
            clock.advance(action.apartMs);
          }
          break;
        case 'wait':
          clock.advance(action.ms);
          break;
        case 'step':
          clock.step(action.ms);
          break;
        case 'restart':
          for (const { limiter } of servers) await limiter.close();
          servers = open(limiterTable(1 << 20));
          models = ids.map(() => new ModelSubject(LIMITS));
          everyModel.push(...models);
          banModel.restart();
          incarnation++;
          break;
      }
    }
    checkPeriods(everyModel);
    checkTrace(events, placed, firstReads);
  } finally {
    store.close();
  }
}

async function property(t: TestContext, workers: number, policy: BanPolicy, runs: number): Promise<void> {
  const dir = tempDir(t);
  const seed = Number(process.env.PETSTORE_MODEL_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const numRuns = Number(process.env.PETSTORE_MODEL_RUNS ?? runs);
  console.log(`in-process limits model, ${workers} workers: seed ${seed}, ${numRuns} sequences (PETSTORE_MODEL_SEED=${seed} replays them)`);
  let n = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(actionArb, { minLength: 5, maxLength: 40 }), (actions) => run(actions, dir, n++, workers, policy)),
    { seed, numRuns, path: process.env.PETSTORE_MODEL_PATH },
  );
}

test('requests, waits up to a day, wall clocks stepped a day either way and restarts keep the limiter and the bans to the model', (t) =>
  property(t, 1, POLICY, 300));

test("the same on three workers' limiters sharing one table, each request decided by any of them", (t) =>
  property(t, WORKERS, { ...POLICY, cacheTtlMs: 0 }, 200));
