/**
 * Creates that outlive their answer, against real server processes on PostgreSQL, straight and through
 * a PgBouncer in transaction pooling mode (which carries no server-side statement_timeout): a second
 * connection straight to PostgreSQL holds `LOCK TABLE pets IN SHARE MODE` (as CREATE INDEX or ALTER
 * TABLE would) while a create waits behind it past the service's 2 s timeout.
 * - With an Idempotency-Key, retries end with exactly one pet for the key, replayed from then on: when
 *   the answer was a 503, when the instance was killed while its create waited and another answers the
 *   retry, and when the key was taken over while the first create still waited.
 * - Without one, a create whose instance was killed while it waited is stored once the lock is gone, and
 *   stays: nothing deletes it later (docs/reliability.md).
 * - On SQLite, a create that failed behind another process's write lock stored nothing, ever.
 */
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createTestDatabase, requirePostgres, untilWaitingOnLocks } from '../support/engines.ts';
import { pgbouncerInstalled, startPgbouncer } from '../support/pgbouncer.ts';
import { keysCreate, startServerProcess, type ServerProcess } from '../support/processes.ts';
import { atEnd, killAtExit, tempDir } from '../support/temp.ts';
import { requireTool } from '../support/tools.ts';
import { eventually } from '../support/waiting.ts';

/** A 503's Retry-After while storage is unavailable or locked (docs/scale-out.md, docs/reliability.md). */
const UNAVAILABLE_RETRY_AFTER = 2;

interface Answer {
  status: number;
  replayed: boolean;
  retryAfter: number;
  text: string;
  json: { id?: number; message?: string };
}

/** A POST /v1/pets and its answer; rejects when the connection dies with the server. */
async function create(server: ServerProcess, key: string, body: object, idempotencyKey?: string): Promise<Answer> {
  const res = await fetch(`${server.url}/v1/pets`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  return {
    status: res.status,
    replayed: res.headers.get('idempotent-replayed') === 'true',
    retryAfter: Number(res.headers.get('retry-after') ?? 0),
    text,
    json: JSON.parse(text) as Answer['json'],
  };
}

/** Retries as a client that honours Retry-After would, until the create is answered 201: every answer on the way. */
async function retryUntilCreated(server: ServerProcess, key: string, body: object, idempotencyKey: string): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < 40; i++) {
    const answer = await create(server, key, body, idempotencyKey);
    answers.push(answer);
    if (answer.status === 201) return answers;
    assert.ok([409, 503].includes(answer.status), answer.text);
    if (answer.status === 503) assert.equal(answer.retryAfter, UNAVAILABLE_RETRY_AFTER, `a 503's Retry-After`);
    else assert.ok(answer.retryAfter >= 1 && answer.retryAfter <= 5, `Retry-After ${answer.retryAfter}`);
    await sleep(answer.retryAfter * 1000);
  }
  assert.fail(`no 201 after ${answers.length} retries: ${answers.map((a) => a.status).join(',')}`);
}

/** The test's database, reached straight or through a PgBouncer of the test's own, and a connection that holds the lock. */
interface Setup {
  /** DATABASE_URL for the servers. */
  serviceUrl: string;
  /** Holds `LOCK TABLE pets IN SHARE MODE` until release(). */
  lock(): Promise<{ release(): Promise<void> }>;
  /** Until n statements of the database wait for a lock. */
  waiting(n: number): Promise<void>;
  /** Straight to PostgreSQL. */
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]>;
}

/** Runs fn with a database of its own (and a PgBouncer in front, through it), all undone when the test ends. */
async function withSetup(t: TestContext, through: 'direct' | 'pgbouncer', fn: (setup: Setup) => Promise<void>) {
  if (!requirePostgres(t, `creates held up by a lock, ${through}`)) return;
  const noPgbouncer =
    through === 'pgbouncer' && !pgbouncerInstalled() ? 'PgBouncer is not installed: apt-get install -y pgbouncer' : undefined;
  if (!requireTool(t, 'creates held up by a lock through PgBouncer', noPgbouncer)) return;
  const database = await createTestDatabase(t);
  // A failed check leaves its lock held; the drop at the end ends every connection, which is no error here.
  const client = () => {
    const c = new pg.Client({ connectionString: database.url });
    c.on('error', () => undefined);
    atEnd(t, () => c.end().catch(() => undefined));
    return c;
  };
  const observer = client();
  await observer.connect();
  let serviceUrl = database.url;
  if (through === 'pgbouncer') {
    const bouncer = await startPgbouncer(database.url);
    atEnd(t, () => bouncer.stop());
    serviceUrl = bouncer.url;
  }
  await fn({
    serviceUrl,
    async lock() {
      const locker = client();
      await locker.connect();
      await locker.query('BEGIN; LOCK TABLE pets IN SHARE MODE');
      return { release: () => locker.query('COMMIT').then(() => undefined) };
    },
    waiting: (n) => untilWaitingOnLocks(observer, database.url, n, 10_000),
    async query(text, values) {
      return (await observer.query(text, values)).rows;
    },
  });
}

async function stop(server: ServerProcess | undefined): Promise<void> {
  if (!server || server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGKILL');
  await server.exited;
}

const petsNamed = (setup: Setup, name: string) => setup.query<{ id: string }>('SELECT id FROM pets WHERE name = $1 ORDER BY id', [name]);

for (const through of ['direct', 'pgbouncer'] as const) {
  describe(`a create held up by a lock on pets (PostgreSQL ${through === 'direct' ? 'straight' : 'through PgBouncer'})`, () => {
    test('answered 503 past its timeout; retries with the same key, during and after the lock, end with one pet, then replays', (t) =>
      withSetup(t, through, async (setup) => {
        const env = { DATABASE_URL: setup.serviceUrl };
        const key = await keysCreate(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000');
        const server = await startServerProcess(env, { owner: t });
        try {
          const body = { name: 'stalled', categoryId: 1 };
          const lock = await setup.lock();
          const lockedAt = Date.now();
          const first = await create(server, key, body, 'stall-1');
          assert.equal(first.status, 503, first.text);
          assert.equal(first.retryAfter, UNAVAILABLE_RETRY_AFTER);
          const during = await create(server, key, body, 'stall-1');
          assert.equal(during.status, 409, 'the claim of a create whose outcome is unknown is kept: ' + during.text);
          assert.ok(during.retryAfter >= 1 && during.retryAfter <= 5);
          await sleep(Math.max(0, lockedAt + 3000 - Date.now())); // a 3 s lock, as a short CREATE INDEX takes
          await lock.release();

          const retries = await retryUntilCreated(server, key, body, 'stall-1');
          const created = retries.at(-1)!;
          for (let i = 0; i < 3; i++) {
            const again = await create(server, key, body, 'stall-1');
            assert.equal(again.status, 201);
            assert.ok(again.replayed, 'replayed from then on');
            assert.equal(again.text, created.text);
          }
          const stored = await petsNamed(setup, 'stalled');
          assert.deepEqual(
            stored.map((r) => Number(r.id)),
            [created.json.id],
            'exactly one pet for the key',
          );
          console.log(
            `# ${through}: 503, 409 during the lock, then ${retries.map((a) => a.status).join(' ')} ` +
              `(${created.replayed ? 'the stalled create had committed: replayed' : 'created by the retry'})`,
          );
        } finally {
          await stop(server);
        }
      }));

    test('the instance is killed while its create waits; another instance answers the retries, taking the key over while the first create still waits: one pet', (t) =>
      withSetup(t, through, async (setup) => {
        const env = { DATABASE_URL: setup.serviceUrl };
        const key = await keysCreate(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000');
        const body = { name: 'killed', categoryId: 2 };
        let first: ServerProcess | undefined;
        let second: ServerProcess | undefined;
        try {
          first = await startServerProcess(env, { owner: t });
          const lock = await setup.lock();
          const lost = create(first, key, body, 'kill-1').catch(() => undefined);
          await setup.waiting(1); // claimed, and its create waits behind the lock
          await stop(first);
          assert.equal(await lost, undefined, 'no answer: the instance died');

          second = await startServerProcess(env, { owner: t });
          // Its claim is in flight (the killed instance's statement is still queued): 409 until it may be taken over.
          const answers: Answer[] = [];
          for (;;) {
            const answer = await create(second, key, body, 'kill-1');
            answers.push(answer);
            if (answer.status !== 409) break;
            await sleep(answer.retryAfter * 1000);
          }
          // Taken over: the new claimant's create waits behind the same lock, past its timeout.
          assert.equal(answers.at(-1)!.status, 503, answers.at(-1)!.text);
          assert.equal(answers.at(-1)!.retryAfter, UNAVAILABLE_RETRY_AFTER);
          await lock.release();

          const retries = await retryUntilCreated(second, key, body, 'kill-1');
          const created = retries.at(-1)!;
          assert.equal((await create(second, key, body, 'kill-1')).text, created.text);
          assert.deepEqual(
            (await petsNamed(setup, 'killed')).map((r) => Number(r.id)),
            [created.json.id],
            'exactly one pet: the killed instance’s create, committing late, made nothing',
          );
          console.log(`# ${through}: killed while waiting; then ${[...answers, ...retries].map((a) => a.status).join(' ')}`);
        } finally {
          await stop(first);
          await stop(second);
        }
      }));

    test('without an Idempotency-Key: the instance is killed while its create waits; the pet is stored once the lock is gone, and stays', (t) =>
      withSetup(t, through, async (setup) => {
        const env = { DATABASE_URL: setup.serviceUrl };
        const key = await keysCreate(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000');
        let first: ServerProcess | undefined;
        let second: ServerProcess | undefined;
        try {
          first = await startServerProcess(env, { owner: t });
          const lock = await setup.lock();
          const lost = create(first, key, { name: 'unanswered', categoryId: 3 }).catch(() => undefined);
          await setup.waiting(1);
          await stop(first);
          assert.equal(await lost, undefined);
          // Released before the statement's own timeout (straight to PostgreSQL, 2 s): it commits.
          await lock.release();
          await eventually(async () => (await petsNamed(setup, 'unanswered')).length === 1, 5000);
          const [{ id }] = (await petsNamed(setup, 'unanswered')) as [{ id: string }];

          second = await startServerProcess(env, { owner: t });
          const read = async () => (await fetch(`${second!.url}/v1/pets/${id}`, { headers: { authorization: `Bearer ${key}` } })).status;
          assert.equal(await read(), 200);
          await sleep(3000); // an undo, where one existed, ran within a second of the database answering
          assert.equal(await read(), 200, 'nothing deletes it later');
          assert.equal((await petsNamed(setup, 'unanswered')).length, 1);
        } finally {
          await stop(first);
          await stop(second);
        }
      }));
  });
}

test('SQLite: a create that failed behind another process’s write lock stored nothing, then or later', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'petstore.db');
  const env = { DATABASE_URL: `sqlite:${path}` };
  const key = await keysCreate(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000');
  const server = await startServerProcess(env, { owner: t });
  const holder = join(dir, 'holder.mjs');
  // Holds the write lock longer than the server's busy_timeout (5 s), then lets go.
  writeFileSync(
    holder,
    `import { DatabaseSync } from 'node:sqlite';
     const db = new DatabaseSync(process.argv[2]);
     db.exec('BEGIN IMMEDIATE');
     process.send('locked');
     setTimeout(() => { db.exec('COMMIT'); db.close(); process.exit(0); }, 6500);`,
  );
  try {
    const child = fork(holder, [path], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
    killAtExit(child);
    atEnd(t, () => child.kill('SIGKILL'));
    await new Promise((resolve) => child.once('message', resolve));
    const refused = await create(server, key, { name: 'behind the lock', categoryId: 1 });
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.retryAfter, UNAVAILABLE_RETRY_AFTER, 'the Retry-After of a write refused behind a lock');
    await new Promise((resolve) => child.once('exit', resolve));
    assert.equal((await create(server, key, { name: 'after the lock', categoryId: 1 })).status, 201);
    await sleep(1000);
    const listed = await (await fetch(`${server.url}/v1/pets?limit=100`, { headers: { authorization: `Bearer ${key}` } })).text();
    assert.ok(!listed.includes('behind the lock'), listed);
  } finally {
    await stop(server);
  }
});
