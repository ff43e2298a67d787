/**
 * Two rate-limit promises where timing is unkind, against real server processes:
 * - Clients that wait out every Retry-After are never banned, however many workers share the key and
 *   however many minute windows they span: the ban grace counts from the first refusal of the window
 *   a refusal waits for. 25 workers on a 30-a-minute key, across three windows, on one SQLite instance
 *   and on two instances sharing PostgreSQL + Redis.
 * - With Redis, minute windows follow Redis's clock, not an instance's: an instance whose clock is
 *   10 s behind neither reopens a window Redis has closed nor reports windows of its own.
 * Real time is needed: what is at stake is real UTC minute boundaries as server processes and Redis's
 * TIME see them, and workers that wake from real Retry-After sleeps around those boundaries. A fake
 * clock injected into the limiter would replace exactly the clocks under test. The three scenarios
 * run side by side, so the file takes as long as the longest: 75 to 135 s, by the second it starts at.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { createTestDatabase, newKeyPrefix, REDIS_URL, requirePostgres } from '../support/engines.ts';
import { keysCreate, startServerProcess, type EnvOverrides, type ServerProcess } from '../support/processes.ts';
import { atEnd, tempDir } from '../support/temp.ts';

const PER_MINUTE = 30;
/** A 30-a-minute key whose day never runs out here: 25 workers spend each minute within a second. */
const KEY_ARGS = ['--plan', 'enterprise', '--rpm', String(PER_MINUTE), '--rpd', '100000'];

interface Answer {
  status: number;
  code: string | undefined;
  /** X-RateLimit-Reset (Unix seconds). */
  reset: number;
  retryAfter: number;
  /** Which of the servers answered. */
  server: number;
  /** When it came back, by this process's clock (ms). */
  atMs: number;
}

async function getPets(servers: readonly ServerProcess[], server: number, key: string): Promise<Answer> {
  const res = await fetch(`${servers[server]!.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
  const body = (await res.json()) as any;
  return {
    status: res.status,
    code: res.status === 200 ? undefined : body?.code,
    reset: Number(res.headers.get('x-ratelimit-reset')),
    retryAfter: Number(res.headers.get('retry-after')),
    server,
    atMs: Date.now(),
  };
}

/** Sleeps, waking early (without error) when signal aborts. */
async function nap(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, undefined, { signal }).catch(() => undefined);
}

/** Admitted answers per X-RateLimit-Reset. */
function admittedPerWindow(answers: readonly Answer[]): Map<number, number> {
  const counts = new Map<number, number>();
  for (const a of answers) if (a.status === 200) counts.set(a.reset, (counts.get(a.reset) ?? 0) + 1);
  return counts;
}

/**
 * 25 workers on one key, each sending at once after a 200 and sleeping exactly Retry-After after a
 * 429 (as docs/rate-limits.md advises), request after request alternating over the servers, until
 * the third minute window that refused them has had its first refusal and 3 s more (or a ban, a 5xx
 * or anything else unexpected stops them early). Then: no ban, no 5xx, and exactly the limit
 * admitted in every window that refused.
 */
async function honestWorkers(t: TestContext, servers: readonly ServerProcess[], key: string): Promise<void> {
  const answers: Answer[] = [];
  const failures: string[] = [];
  /** Per refusing window (its reset, Unix seconds): when its first refusal came back. */
  const firstRefusal = new Map<number, number>();
  const stop = new AbortController();
  // Three windows take at most about 2 minutes; a run that cannot reach them still ends.
  const deadline = setTimeout(() => stop.abort(), 240_000);
  const worker = async (w: number) => {
    for (let n = 0; !stop.signal.aborted; n++) {
      let a: Answer;
      try {
        a = await getPets(servers, (w + n) % servers.length, key);
      } catch (err) {
        failures.push(`worker ${w}: ${String(err)}`);
        return stop.abort();
      }
      answers.push(a);
      if (a.status === 200) continue;
      if (a.status !== 429 || a.code !== 'rate_limited') return stop.abort();
      if (!firstRefusal.has(a.reset)) {
        firstRefusal.set(a.reset, a.atMs);
        // Refusals counted toward a ban start 1 s after a window's first refusal: 3 s leave time for them.
        if (firstRefusal.size === 3) setTimeout(() => stop.abort(), 3000);
      }
      await nap(a.retryAfter * 1000, stop.signal);
    }
  };
  await Promise.all(Array.from({ length: 25 }, (_, w) => worker(w)));
  clearTimeout(deadline);

  const refusals = answers.filter((a) => a.status === 429).length;
  t.diagnostic(
    `${answers.length} answers, ${refusals} refused; admitted per window ${JSON.stringify(Object.fromEntries(admittedPerWindow(answers)))}`,
  );
  assert.deepEqual(failures, []);
  const start = Math.min(...firstRefusal.values());
  const banned = answers.find((a) => a.code === 'key_banned');
  assert.equal(
    banned,
    undefined,
    `first key_banned ${banned ? banned.atMs - start : 0} ms after the first refusal, the ban ending at ` +
      `${new Date((banned?.reset ?? 0) * 1000).toISOString()}; first refusals at ` +
      `${[...firstRefusal.values()].map((at) => new Date(at).toISOString()).join(', ')}`,
  );
  const unexpected = answers.filter((a) => a.status !== 200 && !(a.status === 429 && a.code === 'rate_limited'));
  assert.deepEqual(unexpected, [], 'only 200 and 429 rate_limited, no 5xx');
  // Three consecutive minutes refused the workers, and each admitted exactly its limit.
  const refusing = [...firstRefusal.keys()].sort((x, y) => x - y);
  assert.equal(refusing.length, 3, `refusing windows ${JSON.stringify(refusing)}`);
  assert.deepEqual(refusing, [refusing[0]!, refusing[0]! + 60, refusing[0]! + 120]);
  const admitted = admittedPerWindow(answers);
  for (const reset of refusing) assert.equal(admitted.get(reset), PER_MINUTE, `admitted in the window ending at ${reset}`);
  // A window entered part-way (the first, when the run began late in a minute) admits no more.
  for (const [reset, n] of admitted) assert.ok(n <= PER_MINUTE, `${n} admitted in the window ending at ${reset}`);
  for (const reset of admitted.keys()) assert.equal(reset % 60, 0);
}

/** Redis's clock (epoch ms), as TIME gives it. */
async function redisNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

describe('rate limits where timing is unkind (real processes, real minute windows)', { concurrency: true }, () => {
  test('workers that wait out each Retry-After are never banned across three windows: one SQLite instance', async (t) => {
    const env: EnvOverrides = { DATABASE_URL: `sqlite:${join(tempDir(t), 'petstore.db')}`, LOG_LEVEL: 'warn' };
    const servers = [await startServerProcess(env, { owner: t })];
    await honestWorkers(t, servers, await keysCreate(env, ...KEY_ARGS));
  });

  test('workers that wait out each Retry-After are never banned across three windows: two instances on PostgreSQL + Redis', async (t) => {
    if (!requirePostgres(t, 'honest workers on two instances', true)) return;
    // Undone in reverse: the servers (their last hand-backs landed), the Redis keys, the database.
    const database = await createTestDatabase(t);
    const env: EnvOverrides = { DATABASE_URL: database.url, REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: newKeyPrefix(t), LOG_LEVEL: 'warn' };
    const servers = await Promise.all([startServerProcess(env, { owner: t }), startServerProcess(env, { owner: t })]);
    await honestWorkers(t, servers, await keysCreate(env, ...KEY_ARGS));
  });

  test("an instance whose clock is 10 s behind keeps Redis's minute windows: never more than the limit in one", async (t) => {
    if (!requirePostgres(t, 'an instance with its clock behind', true)) return;
    const dir = tempDir(t);
    // Only this process's Date.now moves; the marker line shows the file was loaded.
    const behind = join(dir, 'clock-behind.mjs');
    writeFileSync(behind, "const real = Date.now;\nDate.now = () => real() - 10_000;\nprocess.stderr.write('clock 10 s behind\\n');\n");
    const database = await createTestDatabase(t);
    // Clients that keep sending while refused are what this needs; a ban would end the test early.
    const env: EnvOverrides = {
      DATABASE_URL: database.url,
      REDIS_URL: REDIS_URL!,
      REDIS_KEY_PREFIX: newKeyPrefix(t),
      LOG_LEVEL: 'warn',
      BAN_THRESHOLD: '1000000',
    };
    const redis = new Redis(REDIS_URL!);
    atEnd(t, () => redis.disconnect());
    const servers = await Promise.all([
      startServerProcess(env, { owner: t }),
      startServerProcess({ ...env, NODE_OPTIONS: `--import=${pathToFileURL(behind).href}` }, { owner: t }),
    ]);
    assert.match(servers[1]!.stderr(), /clock 10 s behind/);
    assert.doesNotMatch(servers[0]!.stderr(), /clock 10 s behind/);
    const key = await keysCreate(env, ...KEY_ARGS);

    // A client uses the key once early in a minute (by Redis's clock), through the instance whose
    // clock is right: a counter kept for a fixed time from its first use would then be gone a few
    // seconds into the next minute, while the instance behind still counts in the old one. From
    // second 50 to second 12 of the next minute the workers keep sending: the instance behind
    // thinks the old minute lasts until second 10 of the new one.
    let now = await redisNow(redis);
    const minute = now - (now % 60_000) + (now % 60_000 < 3000 ? 0 : 60_000);
    while ((now = await redisNow(redis)) < minute + 500) await sleep(Math.min(500, minute + 500 - now));
    const boundary = minute + 60_000;
    const early = await getPets(servers, 0, key);
    assert.equal(early.status, 200);
    assert.equal(early.reset, boundary / 1000);
    const from = minute + 50_000;
    const until = boundary + 12_000;
    while ((now = await redisNow(redis)) < from) await sleep(Math.min(500, from - now));

    const stop = new AbortController();
    const watch = (async () => {
      while ((await redisNow(redis)) < until) await sleep(100);
      stop.abort();
    })();
    const answers: Answer[] = [early];
    const failures: string[] = [];
    // Each worker alternates A, B, A, ...: the first requests reach the instance whose clock is right.
    const worker = async (w: number) => {
      for (let n = 0; !stop.signal.aborted; n++) {
        let a: Answer;
        try {
          a = await getPets(servers, n % 2, key);
        } catch (err) {
          failures.push(`worker ${w}: ${String(err)}`);
          return stop.abort();
        }
        answers.push(a);
        if (a.status === 429 && a.code === 'rate_limited') await nap(200, stop.signal);
        else if (a.status !== 200) return stop.abort();
      }
    };
    await Promise.all([0, 1, 2, 3].map(worker));
    await watch;

    assert.deepEqual(failures, []);
    const unexpected = answers.filter((a) => a.status !== 200 && !(a.status === 429 && a.code === 'rate_limited'));
    assert.deepEqual(unexpected, [], 'only 200 and 429 rate_limited');
    const admitted = answers.filter((a) => a.status === 200);
    const windows = (server: number) => [...new Set(admitted.filter((a) => a.server === server).map((a) => a.reset))].sort((x, y) => x - y);
    const perWindow = Object.fromEntries(admittedPerWindow(answers));
    const seen = `admitted per window: ${JSON.stringify(perWindow)}; A's windows ${windows(0)}, B's ${windows(1)}`;
    t.diagnostic(`${answers.length} answers; ${seen}`);
    // Resets are Redis's whole minutes: the minute the run began in and the next, on both instances.
    for (const a of admitted) assert.equal(a.reset % 60, 0, seen);
    for (const n of Object.values(perWindow)) assert.ok(n <= PER_MINUTE, seen);
    assert.ok(admitted.length <= 2 * PER_MINUTE, seen);
    assert.deepEqual(windows(0), [boundary / 1000, boundary / 1000 + 60], seen);
    assert.deepEqual(windows(1), windows(0), seen);
  });
});
