/**
 * Randomized fault schedules for test/scale-out/fault-schedule.test.ts: a seeded generator
 * (mulberry32), the seeds a run uses, and the faults one seed puts into one minute window of three
 * instances sharing a Redis. Nothing here touches a process: the same seed always gives the same
 * schedule, which is what lets a failure be replayed with PETSTORE_FAULT_SEED.
 */
import { randomInt } from 'node:crypto';

/** mulberry32: a small, fast generator of numbers in [0, 1), the same sequence for the same seed. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The seeds of a run: those PETSTORE_FAULT_SEED lists (comma-separated, to replay them), else
 * PETSTORE_FAULT_SEEDS fresh random ones (`fallbackCount` when unset).
 */
export function faultSeeds(env: NodeJS.ProcessEnv, fallbackCount: number): number[] {
  const listed = env.PETSTORE_FAULT_SEED?.trim();
  if (listed) {
    return listed.split(',').map((text) => {
      const seed = Number(text.trim());
      if (!Number.isSafeInteger(seed) || seed < 0 || seed >= 2 ** 32)
        throw new Error(`PETSTORE_FAULT_SEED: ${JSON.stringify(text)} is not a seed`);
      return seed;
    });
  }
  const count = env.PETSTORE_FAULT_SEEDS === undefined ? fallbackCount : Number(env.PETSTORE_FAULT_SEEDS);
  if (!Number.isSafeInteger(count) || count < 1)
    throw new Error(`PETSTORE_FAULT_SEEDS must be a positive integer, not ${env.PETSTORE_FAULT_SEEDS}`);
  return Array.from({ length: count }, () => randomInt(2 ** 31));
}

/** An instance stopped with a signal and started again, its clock skewS seconds off (0: right). */
export interface InstanceRestart {
  slot: number;
  skewS: number;
  signal: 'SIGTERM' | 'SIGKILL';
}

/**
 * An instance restarted during a Redis fault, `afterS` seconds into it. Redis stays out until the
 * instance has answered for HELD_AFTER_START_S (at most MAX_OUTAGE_S in all), so that it decides in
 * memory before it ever hears from Redis however long it takes to start.
 */
export type DuringOutage = InstanceRestart & { afterS: number };

/** One fault, `atS` seconds after the start of its minute window. */
export type Fault =
  | { atS: number; kind: 'redis-pause'; forS: number; during?: DuringOutage }
  | { atS: number; kind: 'redis-restart-empty'; downS: number; during?: DuringOutage }
  | ({ atS: number; kind: 'instance-restart' } & InstanceRestart)
  | { atS: number; kind: 'instance-replace'; slot: number }
  | { atS: number; kind: 'instance-clock-step'; slot: number; stepS: number; forS: number }
  | { atS: number; kind: 'worker-end'; slot: number; worker: number };

/** Workers each instance runs (docs/workers.md): a fault may end one of them while the process serves. */
export const WORKERS_PER_INSTANCE = 2;

/** How many instances a schedule restarts among. */
export const SLOTS = 3;
export const HELD_AFTER_START_S = 2;
export const MAX_OUTAGE_S = 25;
/** Every Redis fault of a window is planned to be over by this second, and instances are set right at RESET_AT_S. */
const REDIS_FAULTS_END_S = 50;
const RESET_AT_S = 52;

const DAY_S = 86_400;

const tenths = (x: number) => Math.round(x * 10) / 10;

/**
 * The faults of one seed, in the order they start: one or two Redis faults (paused for 3 to 12 s, or
 * restarted empty after 0.5 to 4 s down) from second 12 on, so that the first seconds of the window
 * after a seed's own (where its clients' key still sends) are clear of them; in more than half of them
 * an instance restarts within the first 1.5 s and Redis is held out until it answers, half of those
 * with its clock 15 to 30 s ahead (an instance that has not heard from Redis when it counts, its clock
 * in the next minute: the order that moved a window's start forward); other restarts anywhere up to
 * second 48; skews of ±30 s often, any other up to 30 s sometimes. In most seeds one running
 * instance's wall clock is stepped a day forward or back for 2 to 8 s, then stepped back, anywhere
 * from second 5 to 44, a Redis fault or a restart of its own included. In more than half, one of an instance's
 * workers ends (an uncaught error) from second 4 to 46 and its process starts it again. At second 52 every instance
 * left with a skew is replaced by one with its clock right, so that each seed starts from the same state.
 */
export function faultSchedule(seed: number): Fault[] {
  const random = mulberry32(seed);
  const between = (low: number, high: number) => tenths(low + random() * (high - low));
  const unused = [...Array(SLOTS).keys()];
  const takeSlot = () => unused.splice(Math.floor(random() * unused.length), 1)[0]!;
  /** An instance restart; `ahead` is how likely its clock is 30 s ahead, the skew that moved windows. */
  const restart = (ahead: number): InstanceRestart => {
    const u = random();
    const skewS = u < ahead ? Math.round(between(15, 30)) : u < ahead + 0.15 ? -30 : u < ahead + 0.4 ? 0 : Math.round(between(-30, 30));
    return { slot: takeSlot(), skewS, signal: random() < 0.5 ? 'SIGKILL' : 'SIGTERM' };
  };

  const faults: Fault[] = [];
  const restarts: InstanceRestart[] = [];
  const redisFaults = random() < 0.5 ? 1 : 2;
  let earliest = 12;
  for (let n = 0; n < redisFaults; n++) {
    const first = n === 0 && redisFaults === 2;
    const atS = between(earliest, first ? 24 : 40);
    const longest = Math.min(first ? 8 : 12, REDIS_FAULTS_END_S - atS);
    const paused = random() < 0.6;
    const lengthS = paused ? between(3, longest) : between(0.5, 4);
    const during = random() < 0.6 ? { ...restart(0.5), afterS: between(0.2, 1.5) } : undefined;
    if (during) restarts.push(during);
    faults.push(
      paused ? { atS, kind: 'redis-pause', forS: lengthS, during } : { atS, kind: 'redis-restart-empty', downS: lengthS, during },
    );
    earliest = atS + lengthS + 3;
  }
  const others = Math.floor(random() * (unused.length + 1));
  for (let n = 0; n < others; n++) {
    const other = restart(0.35);
    restarts.push(other);
    faults.push({ atS: between(3, 48), kind: 'instance-restart', ...other });
  }
  if (random() < 0.75) {
    const atS = between(5, 44);
    faults.push({
      atS,
      kind: 'instance-clock-step',
      slot: Math.floor(random() * SLOTS),
      stepS: random() < 0.5 ? DAY_S : -DAY_S,
      forS: between(2, 8),
    });
  }
  // Drawn after the rest, so that a seed's other faults are what they were before workers.
  if (random() < 0.6) {
    const atS = between(4, 46);
    faults.push({ atS, kind: 'worker-end', slot: Math.floor(random() * SLOTS), worker: 1 + Math.floor(random() * WORKERS_PER_INSTANCE) });
  }
  for (const { slot, skewS } of restarts) if (skewS !== 0) faults.push({ atS: RESET_AT_S, kind: 'instance-replace', slot });
  return faults.sort((a, b) => a.atS - b.atS);
}

const clockOf = (skewS: number) => (skewS === 0 ? 'its clock right' : `its clock ${Math.abs(skewS)} s ${skewS > 0 ? 'ahead' : 'behind'}`);
const describeRestart = (r: InstanceRestart) => `instance ${r.slot} stopped (${r.signal}) and started again with ${clockOf(r.skewS)}`;
const describeDuring = (during: DuringOutage | undefined) =>
  during ? `; ${during.afterS} s in, ${describeRestart(during)}, Redis held out until it has answered for ${HELD_AFTER_START_S} s` : '';

/** What a fault does, in words, for the schedule a run prints. */
export function describeFault(fault: Fault): string {
  switch (fault.kind) {
    case 'redis-pause':
      return `Redis paused (SIGSTOP) for ${fault.forS} s${describeDuring(fault.during)}`;
    case 'redis-restart-empty':
      return `Redis shut down without saving, started again empty ${fault.downS} s later${describeDuring(fault.during)}`;
    case 'instance-restart':
      return describeRestart(fault);
    case 'instance-replace':
      return `instance ${fault.slot} replaced by one with its clock right (started first, then the old one stopped with SIGTERM)`;
    case 'worker-end':
      return `worker ${fault.worker} of instance ${fault.slot} ended by an uncaught error, the process serving on and starting it again`;
    case 'instance-clock-step':
      return `instance ${fault.slot}'s wall clock stepped a day ${fault.stepS > 0 ? 'forward' : 'back'} for ${fault.forS} s, then back`;
  }
}
