/**
 * A randomized fault schedule against three `petstore serve` processes of two workers each (one instance toward
 * Redis each: docs/workers.md) sharing a PostgreSQL database and a redis-server of the test's own. Each seed has
 * one minute window: within it the seed decides when Redis is paused (SIGSTOP, then SIGCONT) or shut down and
 * started again empty, and when instances are stopped (SIGTERM or SIGKILL) and started again, some while Redis is
 * out (which is then held out until they have answered a while, so that they decide before they ever hear from
 * Redis), some with their clock up to 30 s off, and when one instance's clock is stepped a day forward or back
 * while it serves, then back, and when one of an instance's workers ends on an uncaught error, its process serving
 * on (test/support/fault-schedules.ts); each process's wall clock is moved by libfaketime. Throughout, clients
 * send a 20-a-minute key's requests round-robin over the instances, and creates with Idempotency-Keys, each sent
 * to two instances at once and then once more to the third, retrying on 409 and 503 after Retry-After.
 *
 * Checked for each seed: in every minute window of its key, the documented limit
 * (test/support/minute-windows.ts: exactly the limit where no outage reached; else no instance above
 * the limit, all together within limit + Σ (limit − cᵢ), plus the limit and what stopped instances had
 * admitted per loss of Redis's counts, and Redis's own admissions within the limit when it kept its
 * counters); one pet per Idempotency-Key, counted in the database; every 201
 * readable on another instance.
 *
 * PETSTORE_FAULT_SEED=N (or N,M,...) replays seeds; otherwise PETSTORE_FAULT_SEEDS random seeds
 * (2 by default: about 3 minutes, by the second it starts at; one more minute per seed). Every seed
 * and its schedule is printed as it starts, and afterwards when each fault began, when Redis was out,
 * each instance's life and, per window, what each instance admitted against the bound. Each seed's
 * window starts on a whole minute, so a replay puts each fault at the same second of the minute.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { MINUTE_MS } from '../../src/domain/durations.ts';
import { createTestDatabase, requirePostgres, withPostgres } from '../support/engines.ts';
import { endWorker, INSPECT_ENV } from '../support/worker-ends.ts';
import {
  describeFault,
  faultSchedule,
  faultSeeds,
  HELD_AFTER_START_S,
  WORKERS_PER_INSTANCE,
  MAX_OUTAGE_S,
  SLOTS,
  type DuringOutage,
  type Fault,
} from '../support/fault-schedules.ts';
import {
  outageEffects,
  windowReports,
  type InstanceLife,
  type KeyAnswer,
  type RedisOutage,
  type WindowReport,
} from '../support/minute-windows.ts';
import {
  keysCreate,
  killServer,
  startServerProcess,
  stopServer,
  unlimitedKey,
  type EnvOverrides,
  type ServerProcess,
} from '../support/processes.ts';
import { startRedis, type RedisProcess } from '../support/redis-servers.ts';
import { faketimeEnv, requireLibfaketime, skipWithoutLibfaketime } from '../support/faketime.ts';
import { atEnd, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const LIMIT = 20;
/** The clients' small key: 20 a minute, a day that never runs out here. */
const KEY_ARGS = ['--plan', 'enterprise', '--rpm', String(LIMIT), '--rpd', '1000000'];
/** The key's requests go on this long into the next seed's window, whose Redis faults start at second 12 at the earliest. */
const TAIL_MS = 10_000;
/** A create sent at second 50 at the latest, each retried up to this long. */
const CREATES_UNTIL_S = 50;
const CREATE_DEADLINE_MS = 120_000;
const run = promisify(execFile);

/** Sleeps until the real clock reads `ms`, or the signal aborts. */
const until = (ms: number, signal?: AbortSignal) => sleep(Math.max(0, ms - Date.now()), undefined, { signal }).catch(() => undefined);
const clockOf = (ms: number) => new Date(ms).toISOString().slice(11, 19);
const seconds = (ms: number) => (ms / 1000).toFixed(1);

/** A server process of one slot, with what its life shows the windows' bounds. */
interface Instance {
  slot: number;
  server: ServerProcess;
  life: InstanceLife & { limiterLines: { at: number; shared: boolean }[] };
  /** libfaketime's offset file for this process alone, and the offset (s) it holds while no step is under way. */
  clockFile: string;
  skewS: number;
}

/** Writes a process's wall clock offset, in seconds from the real clock, where libfaketime reads it at every reading. */
const setOffset = (file: string, seconds: number) => writeFileSync(file, `${seconds >= 0 ? '+' : ''}${seconds}`);

/** The offset (s) of a server's wall clock from the real one, by its Date header (whole seconds, cached up to 1 s). */
async function offsetOf(url: string): Promise<number> {
  const res = await fetch(`${url}/healthz`);
  await res.arrayBuffer();
  return (Date.parse(res.headers.get('date')!) - Date.now()) / 1000;
}

/** Three slots of one `petstore serve` each, restarted in place; every process that ran is kept for the bounds. */
class Fleet {
  readonly lives: InstanceLife[] = [];
  readonly #slots: (Instance | undefined)[] = Array(SLOTS).fill(undefined);
  /** Per slot, the restart under way: restarts of a slot happen one after the other. */
  readonly #busy: Promise<unknown>[] = Array(SLOTS).fill(Promise.resolve());
  readonly #generations: number[] = Array(SLOTS).fill(0);
  readonly #env: EnvOverrides;
  readonly #dir: string;

  constructor(env: EnvOverrides, dir: string) {
    this.#env = env;
    this.#dir = dir;
  }

  /** The instance serving in the slot (any slot number, taken modulo the count), undefined while it restarts. */
  up(slot: number): Instance | undefined {
    return this.#slots[slot % SLOTS];
  }

  async start(slot: number, skewS: number): Promise<void> {
    this.#slots[slot] = await this.#launch(slot, skewS);
  }

  /** A new process for the slot, not yet in the clients' rotation. */
  async #launch(slot: number, skewS: number): Promise<Instance> {
    const generation = this.#generations[slot]!++;
    const name = `${slot}#${generation}${skewS === 0 ? '' : `(${skewS > 0 ? '+' : ''}${skewS}s)`}`;
    // Every process under libfaketime, its offset in a file of its own, so that any of them can have its clock stepped.
    const clockFile = join(this.#dir, `clock-${slot}-${generation}`);
    setOffset(clockFile, skewS);
    const env = { ...this.#env, ...faketimeEnv(clockFile) };
    const life: Instance['life'] = { name, startedAt: Date.now(), signalledAt: undefined, stoppedAt: undefined, limiterLines: [] };
    this.lives.push(life);
    const server = await startServerProcess(env, { startWithinMs: 60_000 }); // three at once on a busy machine
    // When the limiter says it decides in memory, and when it says it shares again, by when the line is read.
    let partial = '';
    const watch = (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        if (line.includes('"msg":"Redis unreachable')) life.limiterLines.push({ at: Date.now(), shared: false });
        if (line.includes('"msg":"Redis reachable again')) life.limiterLines.push({ at: Date.now(), shared: true });
      }
    };
    watch(server.stdout());
    server.child.stdout!.on('data', watch);
    const off = await offsetOf(server.url);
    assert.ok(Math.abs(off - skewS) < 3, `instance ${name} runs with its clock ${off} s off, not ${skewS}`);
    void server.exited.then(() => (life.stoppedAt = Date.now()));
    return { slot, server, life, clockFile, skewS };
  }

  /**
   * Steps the wall clock of the slot's running process by stepS, as NTP would, and back forS seconds later
   * (nothing when the slot is restarting); returns whom it stepped. Checked by the process's Date header.
   */
  async stepClock(slot: number, stepS: number, forS: number): Promise<string | undefined> {
    const instance = this.#slots[slot];
    if (!instance) return undefined;
    setOffset(instance.clockFile, instance.skewS + stepS);
    let off = NaN;
    await eventually(async () => {
      off = await offsetOf(instance.server.url).catch(() => NaN);
      return Math.abs(off - instance.skewS - stepS) < 3 || instance.server.child.exitCode !== null;
    }, 5000).catch(() => assert.fail(`instance ${instance.life.name}'s clock is ${off} s off after a step of ${stepS} s`));
    await sleep(forS * 1000);
    setOffset(instance.clockFile, instance.skewS);
    return instance.life.name;
  }

  /**
   * Ends one worker of the slot's running process with an uncaught error (nothing when the slot is restarting): its
   * process serves on and starts it again. No outage: the process's limiter is in its main thread.
   */
  async endWorker(slot: number, worker: number): Promise<string | undefined> {
    const instance = this.#slots[slot];
    if (!instance) return undefined;
    await endWorker(instance.server, worker, 'ended by the fault schedule');
    await eventually(
      async () => instance.server.output().includes(`worker ${worker} ended unasked`) || instance.server.child.exitCode !== null,
      10_000,
      50,
    );
    return instance.life.name;
  }

  /** Taken out of the clients' rotation, stopped, and started again. */
  restart(slot: number, skewS: number, signal: 'SIGTERM' | 'SIGKILL'): Promise<unknown> {
    const restarted = this.#busy[slot]!.then(async () => {
      const instance = this.#slots[slot];
      this.#slots[slot] = undefined;
      if (instance) await this.#stop(instance, signal);
      await this.start(slot, skewS);
    });
    this.#busy[slot] = restarted.catch(() => undefined);
    return restarted;
  }

  /** A new process with its clock right takes the slot's place in the rotation, then the old one is stopped. */
  replace(slot: number): Promise<unknown> {
    const replaced = this.#busy[slot]!.then(async () => {
      const fresh = await this.#launch(slot, 0);
      const old = this.#slots[slot];
      this.#slots[slot] = fresh;
      if (old) await this.#stop(old, 'SIGTERM');
    });
    this.#busy[slot] = replaced.catch(() => undefined);
    return replaced;
  }

  async #stop(instance: Instance, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    instance.life.signalledAt = Date.now();
    await (signal === 'SIGKILL' ? killServer(instance.server) : stopServer(instance.server));
  }

  async stopAll(): Promise<void> {
    await Promise.allSettled(this.#busy);
    await Promise.all(this.#slots.map((instance) => instance && stopServer(instance.server)));
  }
}

/** The redis-server the instances share, which the faults pause and restart; each outage is recorded. */
class SharedRedis {
  readonly outages: RedisOutage[] = [];
  #redis: RedisProcess | undefined;
  readonly #dir: string;

  constructor(dir: string) {
    this.#dir = dir;
  }

  get port(): number {
    return this.#redis!.port;
  }

  async start(port?: number): Promise<void> {
    this.#redis = await startRedis(this.#dir, 'shared', [], false, port);
  }

  /** SIGSTOP: it hangs with its connections open; SIGCONT once what `hold` returns settles. */
  async pause(label: string, hold: () => Promise<unknown>): Promise<void> {
    const from = Date.now();
    const { child } = this.#redis!;
    child.kill('SIGSTOP');
    try {
      await hold();
    } finally {
      child.kill('SIGCONT');
      this.outages.push({ label, from, backAt: Date.now(), emptied: false });
    }
  }

  /**
   * SHUTDOWN NOSAVE, as an operator stops it, and started again on its port once what `hold` returns
   * settles; it keeps nothing on disk, so it comes back empty.
   */
  async restartEmpty(label: string, hold: () => Promise<unknown>): Promise<void> {
    const from = Date.now();
    const { child, port } = this.#redis!;
    const exited = child.exitCode === null ? once(child, 'exit') : Promise.resolve();
    await run('redis-cli', ['-p', String(port), 'shutdown', 'nosave']).catch(() => undefined); // it closes the connection as it goes
    await exited;
    try {
      await hold();
    } finally {
      await this.start(port);
    }
    this.outages.push({ label, from, backAt: Date.now(), emptied: true });
  }

  async stop(): Promise<void> {
    this.#redis?.child.kill('SIGCONT');
    await this.#redis?.kill();
  }
}

/**
 * Three clients of the small key, each sending one request after another (a tenth of a second
 * apart) to the next instance in rotation, from `from` until `stopAt`. Bans are off on the instances: these
 * clients keep sending while refused, which is what over-admission needs to show.
 */
async function keyTraffic(
  fleet: Fleet,
  key: string,
  from: number,
  stopAt: number,
  answers: KeyAnswer[],
  odd: string[],
  halt: AbortSignal,
): Promise<void> {
  await until(from, halt);
  const client = async (offset: number) => {
    for (let n = offset; Date.now() < stopAt && !halt.aborted; n++) {
      const instance = fleet.up(n);
      if (!instance) {
        await sleep(20);
        continue;
      }
      const sentAt = Date.now();
      try {
        const res = await fetch(`${instance.server.url}/v1/pets?limit=1`, {
          headers: { authorization: `Bearer ${key}` },
          signal: AbortSignal.timeout(15_000),
        });
        const body = await res.text();
        const answer: KeyAnswer = {
          instance: instance.life.name,
          sentAt,
          answeredAt: Date.now(),
          status: res.status,
          remaining: Number(res.headers.get('x-ratelimit-remaining')),
          resetS: Number(res.headers.get('x-ratelimit-reset')),
        };
        answers.push(answer);
        const expected = res.status === 200 || (res.status === 429 && body.includes('"rate_limited"')) || res.status === 503;
        if (!expected || res.headers.get('x-ratelimit-limit') !== String(LIMIT)) {
          odd.push(`${instance.life.name} at ${clockOf(sentAt)}: ${res.status} limit ${res.headers.get('x-ratelimit-limit')} ${body}`);
        }
      } catch {
        answers.push({ instance: instance.life.name, sentAt, answeredAt: Date.now(), status: undefined });
      }
      await sleep(100);
    }
  };
  await Promise.all([0, 1, 2].map(client));
}

/** One Idempotency-Key's create: every answer it got, the pets its 201s named, and what went wrong. */
interface CreateRecord {
  idempotencyKey: string;
  name: string;
  answers: string[];
  ids: Set<string>;
  problems: string[];
}

type Json = Record<string, unknown> | undefined;
const parse = (text: string): Json => {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return undefined;
  }
};

/**
 * Sends the create from the given slot on, one instance after another, until a 201: a 409 (still
 * in progress) and a 503 are retried after their Retry-After, a request that got no answer (its
 * instance restarting) after a moment. The 201's pet is then read on another instance.
 */
async function createUntil201(fleet: Fleet, key: string, record: CreateRecord, firstSlot: number, halt: AbortSignal): Promise<void> {
  const deadline = Date.now() + CREATE_DEADLINE_MS;
  const body = JSON.stringify({ name: record.name, categoryId: 3 });
  for (let slot = firstSlot; ; slot++) {
    if (halt.aborted) return;
    if (Date.now() > deadline) return void record.problems.push(`no 201 within ${CREATE_DEADLINE_MS / 1000} s`);
    const instance = fleet.up(slot);
    if (!instance) {
      await sleep(200);
      continue;
    }
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${instance.server.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': record.idempotencyKey },
        body,
        signal: AbortSignal.timeout(15_000),
      });
      text = await res.text();
    } catch {
      record.answers.push(`${instance.life.name}: no answer`);
      await sleep(300);
      continue;
    }
    const json = parse(text);
    record.answers.push(`${instance.life.name}: ${res.status}${json?.code ? ` ${String(json.code)}` : ''}`);
    if (res.status === 201) {
      record.ids.add(String(json?.id));
      if (json?.name !== record.name) record.problems.push(`201 with ${text}`);
      return readBack(fleet, key, record, String(json?.id), slot + 1, halt);
    }
    const retryAfter = Number(res.headers.get('retry-after'));
    const retryable =
      (res.status === 409 && json?.code === 'idempotency_key_in_use') || (res.status === 503 && json?.code === 'unavailable');
    if (!retryable) return void record.problems.push(`${instance.life.name} answered ${res.status} ${text.slice(0, 200)}`);
    if (!(retryAfter >= 1)) record.problems.push(`${instance.life.name}: ${res.status} without Retry-After`);
    await sleep(Math.max(1, retryAfter) * 1000);
  }
}

/** The pet a 201 named, read with GET /v1/pets/{id} on the next instance that answers. */
async function readBack(fleet: Fleet, key: string, record: CreateRecord, id: string, firstSlot: number, halt: AbortSignal): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (let slot = firstSlot; Date.now() < deadline && !halt.aborted; slot++) {
    const instance = fleet.up(slot);
    if (!instance) {
      await sleep(200);
      continue;
    }
    try {
      const res = await fetch(`${instance.server.url}/v1/pets/${id}`, {
        headers: { authorization: `Bearer ${key}` },
        signal: AbortSignal.timeout(15_000),
      });
      const text = await res.text();
      if (res.status === 503) {
        await sleep(1000);
        continue;
      }
      if (res.status !== 200 || parse(text)?.name !== record.name)
        record.problems.push(`pet ${id} read on ${instance.life.name}: ${res.status} ${text}`);
      return;
    } catch {
      await sleep(300);
    }
  }
  if (!halt.aborted) record.problems.push(`pet ${id} could not be read within 30 s`);
}

/**
 * A new Idempotency-Key every 1.5 s from second 1 to CREATES_UNTIL_S of the window: two sends at once
 * on two instances, then one more on the third.
 */
async function createTraffic(
  fleet: Fleet,
  key: string,
  seed: number,
  windowStart: number,
  records: CreateRecord[],
  halt: AbortSignal,
): Promise<void> {
  const creates: Promise<void>[] = [];
  for (let n = 0; 1000 + n * 1500 <= CREATES_UNTIL_S * 1000 && !halt.aborted; n++) {
    await until(windowStart + 1000 + n * 1500, halt);
    const record: CreateRecord = {
      idempotencyKey: `seed-${seed}-${n}`,
      name: `seed ${seed} pet ${n}`,
      answers: [],
      ids: new Set(),
      problems: [],
    };
    records.push(record);
    creates.push(
      (async () => {
        await Promise.all([createUntil201(fleet, key, record, n, halt), createUntil201(fleet, key, record, n + 1, halt)]);
        await createUntil201(fleet, key, record, n + 2, halt);
      })(),
    );
  }
  await Promise.all(creates);
}

/**
 * Runs each fault at its second of the window; returns when each began, by the real clock. A Redis
 * fault lasts its planned length and, when an instance restarts during it, until that instance has
 * answered for HELD_AFTER_START_S (MAX_OUTAGE_S at most).
 */
async function runFaults(
  fleet: Fleet,
  redis: SharedRedis,
  seed: number,
  faults: readonly Fault[],
  windowStart: number,
  halt: AbortSignal,
): Promise<number[]> {
  const began: number[] = [];
  /** Redis faults never overlap; each waits for the one before. */
  let redisBusy: Promise<unknown> = Promise.resolve();
  const restarts: Promise<unknown>[] = [];
  const holdFor = (lengthS: number, during: DuringOutage | undefined) => () => {
    const waits = [sleep(lengthS * 1000)];
    if (during) {
      const restarted = sleep(during.afterS * 1000).then(() => fleet.restart(during.slot, during.skewS, during.signal));
      restarts.push(restarted);
      waits.push(restarted.then(() => sleep(HELD_AFTER_START_S * 1000)));
    }
    return Promise.race([Promise.all(waits).catch(() => undefined), sleep(MAX_OUTAGE_S * 1000)]);
  };
  const running = faults.map(async (fault, i) => {
    await until(windowStart + fault.atS * 1000, halt);
    if (halt.aborted) return;
    began[i] = Date.now();
    const label = `seed ${seed}'s ${fault.kind} at +${fault.atS} s`;
    switch (fault.kind) {
      case 'redis-pause':
        return (redisBusy = redisBusy.then(() => redis.pause(label, holdFor(fault.forS, fault.during))));
      case 'redis-restart-empty':
        return (redisBusy = redisBusy.then(() => redis.restartEmpty(label, holdFor(fault.downS, fault.during))));
      case 'instance-restart':
        return fleet.restart(fault.slot, fault.skewS, fault.signal);
      case 'instance-replace':
        return fleet.replace(fault.slot);
      case 'instance-clock-step':
        return fleet.stepClock(fault.slot, fault.stepS, fault.forS);
      case 'worker-end':
        return fleet.endWorker(fault.slot, fault.worker);
    }
  });
  await Promise.all(running);
  await Promise.all(restarts); // one that failed fails the run
  return began;
}

/** What the documented limit forbids that a window shows. */
function limitViolations(w: WindowReport): string[] {
  const at = `window ${clockOf(w.start)}`;
  if (w.touchedBy.length === 0) {
    if (w.admitted > LIMIT) return [`${at}, which no outage touched: ${w.admitted} admitted for a limit of ${LIMIT}`];
    // Refusals show the clients asked for more than the limit; what they did not see counted may have been admitted.
    if (w.refused > 0 && w.admitted + w.uncertain < LIMIT) return [`${at}, which no outage touched: only ${w.admitted} admitted`];
    return [];
  }
  const found = Object.entries(w.admittedBy)
    .filter(([, n]) => n > LIMIT)
    .map(([instance, n]) => `${at}: instance ${instance} alone admitted ${n} for a limit of ${LIMIT}`);
  if (w.admitted > w.bound) found.push(`${at}: ${w.admitted} admitted, above the documented bound of ${w.bound}`);
  if (!w.countersLost && w.admittedByRedis > LIMIT) {
    found.push(`${at}: Redis, which kept its counters, admitted ${w.admittedByRedis} for a limit of ${LIMIT}`);
  }
  return found;
}

/** A window's counts, its bound and how it was made, and when each instance admitted (seconds into the window). */
function describeWindow(w: WindowReport, answers: readonly KeyAnswer[]): string {
  const admittedAt = (instance: string) =>
    answers
      .filter((a) => a.instance === instance && a.status === 200 && a.sentAt >= w.start && a.answeredAt < w.start + MINUTE_MS)
      .map((a) => seconds(a.sentAt - w.start));
  const by = Object.entries(w.admittedBy).map(([instance, n]) => {
    const at = admittedAt(instance);
    return `${instance} ${n} (+${at[0]}..+${at.at(-1)} s)`;
  });
  const head =
    `window ${clockOf(w.start)}: ${w.admitted} admitted (${w.admittedByRedis} by Redis) [${by.join(', ')}], ` +
    `${w.refused} refused, ${w.uncertain} uncertain`;
  if (w.touchedBy.length === 0) return `${head}; no outage touched it: exactly ${LIMIT}`;
  return `${head}; touched by ${w.touchedBy.join(', ')}: at most ${w.bound} (${w.boundTerms.join('; ')})`;
}

interface SeedRun {
  seed: number;
  windowStart: number;
  faults: Fault[];
  began: number[];
  answers: KeyAnswer[];
  odd: string[];
  creates: CreateRecord[];
}

test('a randomized schedule of Redis pauses and empty restarts, instance restarts, skewed clocks and ended workers keeps the documented limits and one pet per Idempotency-Key', async (t) => {
  if (!requirePostgres(t, 'the randomized fault schedule on three instances')) return;
  if (skipWithoutLibfaketime('the randomized fault schedule, whose instances run under libfaketime'))
    return t.skip('libfaketime is not installed');
  requireLibfaketime();
  const seeds = faultSeeds(process.env, 2);
  // Undone in reverse: the instances, Redis, the database, the folder.
  const dir = tempDir(t);
  const database = await createTestDatabase(t);
  const redis = new SharedRedis(dir);
  await redis.start();
  atEnd(t, () => redis.stop());
  const env: EnvOverrides = {
    DATABASE_URL: database.url,
    REDIS_URL: `redis://127.0.0.1:${redis.port}`,
    LOG_LEVEL: 'info',
    BAN_THRESHOLD: '1000000',
    // Each instance one process of two workers, one instance toward Redis; its inspector open for a worker-end fault.
    WORKERS: String(WORKERS_PER_INSTANCE),
    ...INSPECT_ENV,
  };
  const fleet = new Fleet(env, dir);
  atEnd(t, () => fleet.stopAll());
  await Promise.all([0, 1, 2].map((slot) => fleet.start(slot, 0)));
  const createsKey = await unlimitedKey(env);
  let nextKey = keysCreate(env, ...KEY_ARGS);

  // A fault that cannot be carried out (an instance that does not start) stops every seed's clients and faults.
  const halt = new AbortController();
  let failure: unknown;
  const runs: Promise<SeedRun | undefined>[] = [];
  let windowStart = Date.now() - (Date.now() % MINUTE_MS) + MINUTE_MS;
  if (windowStart - Date.now() < 3000) windowStart += MINUTE_MS;
  for (const [index, seed] of seeds.entries()) {
    const key = await nextKey;
    if (index + 1 < seeds.length) nextKey = keysCreate(env, ...KEY_ARGS);
    const faults = faultSchedule(seed);
    console.log(
      [
        `# fault schedule ${index + 1} of ${seeds.length}: seed ${seed} (replay: PETSTORE_FAULT_SEED=${seed}), window from ${clockOf(windowStart)} UTC`,
        ...faults.map((fault) => `#   +${fault.atS.toFixed(1).padStart(4)} s  ${describeFault(fault)}`),
      ].join('\n'),
    );
    const start = windowStart;
    const answers: KeyAnswer[] = [];
    const odd: string[] = [];
    const creates: CreateRecord[] = [];
    runs.push(
      Promise.all([
        runFaults(fleet, redis, seed, faults, start, halt.signal),
        keyTraffic(fleet, key, start, start + MINUTE_MS + TAIL_MS, answers, odd, halt.signal),
        createTraffic(fleet, createsKey, seed, start, creates, halt.signal),
      ]).then(
        ([began]) => ({ seed, windowStart: start, faults, began, answers, odd, creates }),
        (err: unknown) => {
          failure ??= err;
          halt.abort();
          return undefined;
        },
      ),
    );
    // The next seed's window starts when this one ends; this one's clients go on into it a while.
    windowStart += MINUTE_MS;
    await until(windowStart, halt.signal);
    if (halt.signal.aborted) break;
  }
  const done = await Promise.all(runs);
  await nextKey.catch(() => undefined); // made for a seed after the last, when a failure stopped the run early
  if (failure !== undefined) throw failure;

  const pets = await withPostgres(database.url, async (client) => {
    const { rows } = await client.query<{ name: string; n: number }>('SELECT name, count(*)::int AS n FROM pets GROUP BY name');
    return new Map(rows.map((row) => [row.name, row.n]));
  });
  const effects = outageEffects(redis.outages, fleet.lives);

  for (const seedRun of done) {
    if (!seedRun) continue;
    const replay = `replay with PETSTORE_FAULT_SEED=${seedRun.seed}`;
    const windows = windowReports(seedRun.answers, fleet.lives, effects, LIMIT);
    const from = seedRun.windowStart;
    const to = from + MINUTE_MS + TAIL_MS;
    const at = (ms: number | undefined) => (ms === undefined ? 'on' : `+${seconds(ms - from)}`);
    const report = [
      `# seed ${seedRun.seed}: the faults began at ` +
        seedRun.began.map((began, i) => `${at(began)} s (${seedRun.faults[i]!.kind})`).join(', '),
      `#   Redis out: ${redis.outages
        .filter((o) => o.backAt >= from && o.from < to)
        .map((o) => `${at(o.from)}..${at(o.backAt)} s${o.emptied ? ' (emptied)' : ''}`)
        .join(', ')}`,
      `#   instances: ${fleet.lives
        .filter((life) => (life.stoppedAt ?? Infinity) >= from && life.startedAt < to)
        .map((life) => `${life.name} ${at(life.startedAt)}..${at(life.stoppedAt)} s`)
        .join(', ')}`,
      ...windows.map((w) => `#   ${describeWindow(w, seedRun.answers)}`),
    ].join('\n');
    console.log(report);

    await t.test(`seed ${seedRun.seed}: the limit in every minute window`, () => {
      assert.deepEqual(seedRun.odd, [], `answers other than 200, 429 rate_limited and 503 to the small key; ${replay}`);
      assert.deepEqual(windows.flatMap(limitViolations), [], `${replay}\n${report}`);
    });

    await t.test(`seed ${seedRun.seed}: one pet per Idempotency-Key, every 201 readable`, () => {
      const problems = seedRun.creates.flatMap((c) => {
        const found: string[] = [...c.problems];
        if (c.ids.size > 1) found.push(`201s named pets ${[...c.ids].join(', ')}`);
        if ((pets.get(c.name) ?? 0) !== 1) found.push(`${pets.get(c.name) ?? 0} pets named ${JSON.stringify(c.name)} in the database`);
        return found.length ? [`${c.idempotencyKey}: ${found.join('; ')} (answers: ${c.answers.join(', ')})`] : [];
      });
      // One line per key that went wrong, the first ten of them: a fault that breaks every create would fill pages.
      const shown = problems.slice(0, 10).join('\n');
      const more = problems.length > 10 ? `\n... and ${problems.length - 10} more` : '';
      assert.ok(
        problems.length === 0,
        `${problems.length} of ${seedRun.creates.length} Idempotency-Keys went wrong; ${replay}\n${shown}${more}`,
      );
    });
  }
});
