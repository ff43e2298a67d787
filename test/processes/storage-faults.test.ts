/**
 * SQLite storage faults against a real server process: another process holding the write lock, a full
 * disk (a tmpfs of the test's own) and storage that refuses writes (EROFS injected into the server's
 * pwrite calls, as a file system remounted read-only answers). Probes and reads keep answering, writes
 * get 503 with Retry-After, readiness says so, the log names each change of state once, writes and
 * readiness come back by themselves, and nothing acknowledged is lost or created twice.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import {
  CLI,
  freePort,
  killServer,
  startServerCommand,
  startServerProcess,
  unlimitedKey,
  type ServerProcess,
} from '../support/processes.ts';
import { atEnd, killAtExit, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

/** Generous: an event loop blocked by a waiting write would take the lock's whole hold time. */
const PROMPT_MS = 1000;

interface Answer {
  status: number;
  retryAfter: string | null;
  body: { id?: number; name?: string; code?: string; message?: string };
  ms: number;
}

async function call(url: string, init: RequestInit = {}): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(url, init);
  const text = await res.text();
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    body: text ? JSON.parse(text) : {},
    ms: performance.now() - started,
  };
}

function post(server: ServerProcess, key: string, name: string, idempotencyKey?: string): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
  return call(`${server.url}/v1/pets`, { method: 'POST', headers, body: JSON.stringify({ name, categoryId: 1 }) });
}

/** Every stored pet's name, in id order, following the list's next links. */
async function storedNames(server: ServerProcess, key: string): Promise<string[]> {
  const names: string[] = [];
  let next: string | undefined = `${server.url}/v1/pets?limit=100`;
  while (next !== undefined) {
    const res = await fetch(next, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    names.push(...((await res.json()) as { name: string }[]).map((p) => p.name));
    const link = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
    next = link === undefined ? undefined : new URL(link, server.url).href;
  }
  return names;
}

/** How many lines of the server's log contain text. */
const linesWith = (server: ServerProcess, text: string): number =>
  server
    .output()
    .split('\n')
    .filter((l) => l.includes(text)).length;

/** Asserts the server logged text exactly once, allowing the line a moment to come through the pipe. */
async function loggedOnce(server: ServerProcess, text: string): Promise<void> {
  await eventually(async () => linesWith(server, text) > 0, 2000, 20).catch(() => undefined);
  assert.equal(linesWith(server, text), 1, `"${text}" logged once:\n${server.output()}`);
}

/** No line logs a stack: the store logged the cause once, so neither requests nor the purge of expired idempotency keys repeat it. */
function assertNoStacks(server: ServerProcess): void {
  const stacks = server
    .output()
    .split('\n')
    .filter((l) => l.includes('"stack"'));
  assert.deepEqual(stacks, [], 'no stack traces in the log');
}

/** The Retry-After docs/reliability.md promises: a lock is usually gone within seconds; space or a writable disk take longer. */
const RETRY_AFTER = { lock: '2', storage: '5' } as const;

/** A 503 `unavailable`; with `retryAfter`, exactly that Retry-After (else any whole number of seconds). */
function assertUnavailable(answer: Answer, what: string, retryAfter?: string): void {
  assert.equal(answer.status, 503, `${what}: ${JSON.stringify(answer.body)}`);
  assert.equal(answer.body.code, 'unavailable');
  if (retryAfter === undefined) assert.match(answer.retryAfter ?? '', /^[1-9]\d*$/, `${what}: Retry-After`);
  else assert.equal(answer.retryAfter, retryAfter, `${what}: Retry-After`);
}

async function ready(server: ServerProcess): Promise<Answer> {
  return call(`${server.url}/readyz`);
}

/** A server on a SQLite file, with a key that no rate limit stops; stopped when the test ends. */
async function sqliteServer(t: TestContext, file: string, extra: Record<string, string> = {}) {
  const env = { DATABASE_URL: `sqlite:${file}`, ...extra };
  const key = await unlimitedKey(env);
  const server = await startServerProcess(env);
  atEnd(t, () => killServer(server));
  return { server, key };
}

/** Another process that takes the database's write lock and holds it for holdMs; resolves once it holds it. */
async function holdWriteLock(t: TestContext, file: string, holdMs: number): Promise<{ released: Promise<void> }> {
  const code = `
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
    const db = new DatabaseSync(process.argv[1]);
    db.exec('PRAGMA busy_timeout = 5000');
    db.exec('BEGIN IMMEDIATE');
    console.log('held');
    setTimeout(() => { db.exec('ROLLBACK'); db.close(); }, Number(process.argv[2]));`;
  const holder = spawn(process.execPath, ['-e', code, file, String(holdMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  killAtExit(holder);
  atEnd(t, () => void holder.kill('SIGKILL'));
  const released = new Promise<void>((resolve) => holder.on('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    holder.stdout.on('data', () => resolve());
    holder.on('exit', (c) => reject(new Error(`the lock holder exited with ${c} before holding the lock`)));
  });
  return { released };
}

/** Probes and reads, again and again while `until` is pending: each answer's time. */
async function probeWhile(server: ServerProcess, key: string, petId: number, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => (done = true));
  const times: number[] = [];
  const auth = { headers: { authorization: `Bearer ${key}` } };
  while (!done) {
    for (const [path, init] of [
      ['/healthz', {}],
      [`/v1/pets/${petId}`, auth],
      ['/v1/pets?limit=5', auth],
    ] as const) {
      const answer = await call(`${server.url}${path}`, init);
      assert.equal(answer.status, 200, `${path} while the lock is held`);
      times.push(answer.ms);
    }
  }
  return times;
}

/** The slowest of probeWhile's answers; with none, any bound on it would hold (Math.max() of nothing is -Infinity). */
function slowestOf(times: readonly number[]): number {
  assert.ok(times.length >= 3 && times.length % 3 === 0, `whole rounds of the three probes, at least one: ${times.length} answers`);
  return Math.max(...times);
}

test('another process holding the write lock blocks no probe or read; writes waiting past SQLITE_LOCK_WAIT_MS get 503, and recover', async (t) => {
  const file = join(tempDir(t), 'petstore.db');
  const { server, key } = await sqliteServer(t, file, { SQLITE_LOCK_WAIT_MS: '1000' });
  const before = await post(server, key, 'before');
  assert.equal(before.status, 201);

  const { released } = await holdWriteLock(t, file, 3500);
  const waiting = Promise.all([post(server, key, 'held-1'), post(server, key, 'held-2'), post(server, key, 'held-3', 'retry-me')]);
  const times = await probeWhile(server, key, before.body.id!, waiting);
  const slowest = slowestOf(times);
  t.diagnostic(`${times.length} probes and reads while creates waited for the lock, the slowest ${Math.round(slowest)} ms`);
  assert.ok(slowest < PROMPT_MS, `probes and reads answered within ${PROMPT_MS} ms while writes waited: ${times.map(Math.round)}`);

  for (const [i, answer] of (await waiting).entries()) {
    assertUnavailable(answer, `create ${i} waiting for the lock`, RETRY_AFTER.lock);
    assert.ok(answer.ms >= 900, `create ${i} waited for the lock before its 503 (${Math.round(answer.ms)} ms)`);
  }
  const notReady = await ready(server);
  assertUnavailable(notReady, '/readyz while the lock is held');
  assert.match(notReady.body.message!, /locked by another process/);
  assert.ok(notReady.ms < PROMPT_MS, '/readyz waits for no lock');

  await released;
  await eventually(async () => (await ready(server)).status === 200, 5000);
  assert.equal((await post(server, key, 'after')).status, 201);
  // The refused idempotent create left nothing: its retry creates the pet, once.
  assert.equal((await post(server, key, 'held-3', 'retry-me')).status, 201);
  assert.equal((await post(server, key, 'held-3', 'retry-me')).status, 201); // replayed
  assert.deepEqual(await storedNames(server, key), ['before', 'after', 'held-3']);

  await loggedOnce(server, 'storage writes failing: the database is locked by another process');
  await loggedOnce(server, 'storage writes recovered');
  assertNoStacks(server);
});

test('a lock released within SQLITE_LOCK_WAIT_MS lets the waiting create through', async (t) => {
  const file = join(tempDir(t), 'petstore.db');
  const { server, key } = await sqliteServer(t, file, { SQLITE_LOCK_WAIT_MS: '5000' });
  const before = await post(server, key, 'before');
  const { released } = await holdWriteLock(t, file, 1500);
  const waiting = post(server, key, 'waited');
  const times = await probeWhile(server, key, before.body.id!, released);
  assert.ok(slowestOf(times) < PROMPT_MS, `probes and reads answered within ${PROMPT_MS} ms: ${times.map(Math.round)}`);
  const created = await waiting;
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.ok(created.ms >= 500, 'the create waited for the lock');
  assert.deepEqual(await storedNames(server, key), ['before', 'waited']);
  assert.equal(linesWith(server, 'storage writes failing'), 0, server.output());
});

/** True when the test may mount file systems; otherwise skips it loudly (fails it under CI=true). */
function canMount(t: TestContext, what: string, why: string): boolean {
  console.log('#'.repeat(70) + `\n# SKIPPED: ${what} (${why})\n` + '#'.repeat(70));
  if (process.env.CI === 'true') throw new Error(`CI=true: ${what} cannot run: ${why}`);
  t.skip(why);
  return false;
}

/** A tmpfs of `size` mounted on a new folder, unmounted when the test ends; undefined when it cannot be. */
function smallDisk(t: TestContext, size: string): string | undefined {
  const what = 'the full-disk test';
  if (process.getuid?.() !== 0) return void canMount(t, what, 'mounting a tmpfs needs root');
  const dir = join(tempDir(t), 'disk'); // the folder goes after the tmpfs is unmounted
  mkdirSync(dir);
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { encoding: 'utf8' });
  if (mounted.status === 0) atEnd(t, () => spawnSync('umount', ['-l', dir]));
  if (mounted.status !== 0) return void canMount(t, what, `mount -t tmpfs failed: ${mounted.stderr.trim()}`);
  return dir;
}

/** Writes zeros to file until the file system is full. */
function fill(file: string): void {
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(64 * 1024);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
}

/** Stops the server and counts the pets in its database file, read directly. */
async function petsOnFile(server: ServerProcess, file: string): Promise<number> {
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0, server.output());
  const db = new DatabaseSync(file);
  try {
    return Number((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n);
  } finally {
    db.close();
  }
}

test('a full disk: creates get 503 and readiness fails, one log line each way, and both recover when space is freed', async (t) => {
  const disk = smallDisk(t, '4m');
  if (disk === undefined) return;
  const file = join(disk, 'petstore.db');
  const { server, key } = await sqliteServer(t, file);
  const acknowledged: string[] = [];
  for (let i = 0; i < 20; i++) {
    assert.equal((await post(server, key, `before-${i}`)).status, 201);
    acknowledged.push(`before-${i}`);
  }

  fill(join(disk, 'filler'));
  // The WAL may still have room for a few frames: creates go on until the first refusal.
  let refused: Answer | undefined;
  for (let i = 0; i < 500 && refused === undefined; i++) {
    const answer = await post(server, key, `filling-${i}`);
    if (answer.status === 201) acknowledged.push(`filling-${i}`);
    else refused = answer;
  }
  assert.ok(refused, 'a create failed once the disk was full');
  assertUnavailable(refused, 'the first create on a full disk', RETRY_AFTER.storage);
  for (let i = 0; i < 5; i++) assertUnavailable(await post(server, key, `full-${i}`), 'a create on a full disk', RETRY_AFTER.storage);
  const notReady = await ready(server);
  assertUnavailable(notReady, '/readyz on a full disk');
  assert.match(notReady.body.message!, /disk full/);
  assertUnavailable(await ready(server), '/readyz on a full disk, again');
  assert.equal((await call(`${server.url}/healthz`)).status, 200);
  await loggedOnce(server, 'storage writes failing: disk full');
  assertNoStacks(server);

  unlinkSync(join(disk, 'filler'));
  await eventually(async () => (await ready(server)).status === 200, 5000);
  await loggedOnce(server, 'storage writes recovered');
  assert.equal((await post(server, key, 'after')).status, 201);
  acknowledged.push('after');
  assert.deepEqual(await storedNames(server, key), acknowledged, 'every acknowledged pet, and none refused');
  await loggedOnce(server, 'storage writes failing');
  assert.equal(await petsOnFile(server, file), acknowledged.length);
});

/** fiu-run and fiu-ctrl (Debian's fiu-utils) inject failures into a running process's system calls. */
function hasFiu(t: TestContext): boolean {
  if (spawnSync('fiu-ctrl', ['-h']).error === undefined) return true;
  const why = 'fiu-run and fiu-ctrl are not installed (apt-get install -y fiu-utils)';
  console.log('#'.repeat(70) + `\n# SKIPPED: the read-only storage test (${why})\n` + '#'.repeat(70));
  if (process.env.CI === 'true') throw new Error(`CI=true: ${why}`);
  t.skip(why);
  return false;
}

/*
 * A file system remounted read-only under a running server: Linux refuses `mount -o remount,ro` while
 * a process holds files open for writing (the server holds the database and its WAL), but the kernel
 * itself does it after an error, and writes then fail with EROFS. The same answer is injected here
 * into the server's pwrite calls, through which SQLite writes.
 */
test('storage that refuses writes (EROFS): creates get 503 and readiness fails, and both recover when writes are allowed again', async (t) => {
  if (!hasFiu(t)) return;
  const dir = tempDir(t);
  const file = join(dir, 'petstore.db');
  // fiu's control pipes go in the test's folder, removed with it (by default they stay in /tmp).
  const pipes = join(dir, 'fiu-ctrl');
  const env = { DATABASE_URL: `sqlite:${file}` };
  const key = await unlimitedKey(env);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = await startServerCommand(
    'fiu-run',
    ['-x', '-f', pipes, process.execPath, CLI, 'serve'],
    { ...env, HOST: '127.0.0.1', PORT: String(port) },
    url,
  );
  atEnd(t, () => killServer(server));
  const fiu = (command: string) => {
    const run = spawnSync('fiu-ctrl', ['-f', pipes, '-c', command, String(server.child.pid)], { encoding: 'utf8' });
    assert.equal(run.status, 0, `fiu-ctrl ${command}: ${run.stderr}`);
  };
  const acknowledged = ['before-0', 'before-1', 'before-2'];
  for (const name of acknowledged) assert.equal((await post(server, key, name)).status, 201);

  fiu('enable name=posix/io/rw/pwrite,failinfo=30'); // EROFS
  for (let i = 0; i < 3; i++)
    assertUnavailable(await post(server, key, `refused-${i}`), 'a create on read-only storage', RETRY_AFTER.storage);
  const notReady = await ready(server);
  assertUnavailable(notReady, '/readyz on read-only storage');
  assert.match(notReady.body.message!, /I\/O error/);
  assert.deepEqual(await storedNames(server, key), acknowledged, 'reads still answer');
  await loggedOnce(server, 'storage writes failing: I/O error');

  fiu('disable name=posix/io/rw/pwrite');
  await eventually(async () => (await ready(server)).status === 200, 5000);
  await loggedOnce(server, 'storage writes recovered');
  assert.equal((await post(server, key, 'after')).status, 201);
  acknowledged.push('after');
  assert.deepEqual(await storedNames(server, key), acknowledged);
  assertNoStacks(server);
  assert.equal(await petsOnFile(server, file), acknowledged.length);
});
