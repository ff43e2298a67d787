/**
 * Starts while another process holds the lock migrations are applied under: on PostgreSQL the migration
 * lock (an advisory lock, here held as an operator's session holds it), on SQLite the file's write lock.
 * `petstore serve` and `petstore keys` wait, say so once, and go on once the lock is released, also when
 * it is held past the per-statement bound that used to end them ("Query read timeout"); past
 * MIGRATION_LOCK_WAIT_MS they exit 1 with a line naming the lock, the wait and the setting, and on
 * SQLite near that bound, whichever it is. Real locks, real processes.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MIGRATION_LOCK } from '../../src/storage/postgres/migration-lock.ts';
import { createTestDatabase, requirePostgres, withPostgres } from '../support/engines.ts';
import { holdMigrationLock, holdSqliteWriteLock, type LockHolder } from '../support/lock-holders.ts';
import { CLI, cliEnv, explain, lastLine, runCli, startServerProcess, type CliResult, type ServerProcess } from '../support/processes.ts';
import { killAtExit, tempDir } from '../support/temp.ts';
import { eventually, settledFlag } from '../support/waiting.ts';

/**
 * Longer than what ended such a start before: a statement bound of 2 s on PostgreSQL (the start failed after
 * 2.4 to 3.5 s), a busy_timeout of 5 s on SQLite.
 */
const PAST_THE_OLD_FAILURE_MS = 5500;

/** A database of one engine, and what a start says of its lock and of who holds it. */
interface Setup {
  env: Record<string, string>;
  hold(): Promise<LockHolder>;
  lock: string;
  holder(held: LockHolder): string;
  /** What the engine's refusal starts with before "gave up". */
  prefix: string;
}

const ENGINES = {
  async postgres(t: TestContext): Promise<Setup | undefined> {
    if (!requirePostgres(t, 'waiting for the PostgreSQL migration lock')) return undefined;
    const database = await createTestDatabase(t);
    const url = new URL(database.url);
    return {
      env: { DATABASE_URL: database.url },
      hold: () => holdMigrationLock(t, database.url, 'session'),
      lock: `the migration lock (PostgreSQL advisory lock ${MIGRATION_LOCK})`,
      holder: ({ session }) =>
        `another session (pid ${session!.pid}, application "lock-holder", user ${session!.user}` +
        `${session!.address === null ? '' : `, from ${session!.address}`})`,
      prefix: `PostgreSQL at ${url.host}, database ${url.pathname.slice(1)}: `,
    };
  },
  async sqlite(t: TestContext): Promise<Setup> {
    const file = join(tempDir(t), 'petstore.db');
    return {
      env: { DATABASE_URL: `sqlite:${file}` },
      hold: () => holdSqliteWriteLock(t, file),
      lock: `the write lock of the SQLite file ${file}`,
      holder: () => 'another process (SQLite does not tell which)',
      prefix: '',
    };
  },
};

/** The server's JSON log lines that say it waits for the lock. */
function waitLines(output: string): { level: number; msg: string }[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: number; msg: string })
    .filter((line) => line.msg.startsWith('waiting for '));
}

for (const [name, setUp] of Object.entries(ENGINES)) {
  describe(`${name}: a start while another process holds the migration lock`, () => {
    test('serve and keys create wait, say so once, and go on once the lock is released', async (t) => {
      const setup = await setUp(t);
      if (!setup) return;
      const held = await setup.hold();
      const waiting = `waiting for ${setup.lock}, which ${setup.holder(held)} holds; waiting up to 300 s (MIGRATION_LOCK_WAIT_MS=300000)`;

      let spawned: ServerProcess | undefined;
      const serving = startServerProcess(setup.env, { owner: t, onSpawn: (server) => (spawned = server) });
      const creating = runCli(['keys', 'create', '--plan', 'free'], setup.env, { timeoutMs: 60_000 });
      const created = settledFlag(creating);
      await eventually(async () => spawned !== undefined && waitLines(spawned.stdout()).length > 0, 10_000, 50);
      await sleep(PAST_THE_OLD_FAILURE_MS);
      const server = spawned!;
      assert.equal(server.child.exitCode, null, `serve still waits:\n${server.output()}`);
      assert.equal(created(), false, 'keys create still waits');
      await assert.rejects(fetch(`${server.url}/healthz`), 'not listening before its migrations');

      await held.release();
      await serving;
      assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
      const result: CliResult = await creating;
      assert.equal(result.code, 0, explain(['keys', 'create'], result));
      const key = lastLine(result.stdout);
      assert.equal((await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status, 200);

      if (name === 'postgres') {
        // So that a start waiting on it could name it: the server's own sessions are named "petstore".
        const { rows } = await withPostgres(setup.env.DATABASE_URL!, (c) =>
          c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'petstore'"),
        );
        assert.ok(rows[0].n > 0, 'the server has a session named petstore');
      }

      const logged = waitLines(server.stdout());
      assert.equal(logged.length, 1, server.output());
      assert.deepEqual([logged[0]!.level, logged[0]!.msg], [40, waiting], 'a warning');
      assert.deepEqual(result.stderr.trimEnd().split('\n'), [`petstore: ${waiting}`], 'said once, on stderr');
    });

    test('past MIGRATION_LOCK_WAIT_MS, serve and keys list exit 1 with a line naming the lock, the wait and the setting', async (t) => {
      const setup = await setUp(t);
      if (!setup) return;
      const held = await setup.hold();
      const env = { ...setup.env, MIGRATION_LOCK_WAIT_MS: '1000', PORT: '0' };
      const waiting = `waiting for ${setup.lock}, which ${setup.holder(held)} holds; waiting up to 1 s (MIGRATION_LOCK_WAIT_MS=1000)`;
      /** The refusal, which names how long it waited (at least the bound) between these two. */
      const assertGaveUp = (line = '') => {
        const before = `petstore: ${setup.prefix}gave up after `;
        const after =
          ` s waiting for ${setup.lock}, which ${setup.holder(held)} still holds; MIGRATION_LOCK_WAIT_MS=1000 bounds the wait: ` +
          'start again once it is released, or raise MIGRATION_LOCK_WAIT_MS';
        assert.ok(line.startsWith(before) && line.endsWith(after), `${line}\n  should be\n${before}N${after}`);
        assert.ok(Number(line.slice(before.length, -after.length)) >= 1, line);
      };
      const [served, listed] = await Promise.all([
        runCli(['serve'], env, { timeoutMs: 30_000 }),
        runCli(['keys', 'list'], env, { timeoutMs: 30_000 }),
      ]);

      assert.equal(served.code, 1, explain(['serve'], served));
      assert.deepEqual(
        waitLines(served.stdout).map((line) => line.msg),
        [waiting],
      );
      assert.equal(served.stderr.trimEnd().split('\n').length, 1, served.stderr);
      assertGaveUp(served.stderr.trimEnd());

      assert.equal(listed.code, 1, explain(['keys', 'list'], listed));
      assert.equal(listed.stdout, '');
      const [said, refused, ...more] = listed.stderr.trimEnd().split('\n');
      assert.equal(said, `petstore: ${waiting}`);
      assertGaveUp(refused);
      assert.deepEqual(more, []);

      // Nothing was applied: the next start, with the lock free, migrates the database from scratch.
      if (name === 'postgres') {
        const { rows } = await withPostgres(setup.env.DATABASE_URL!, (c) => c.query("SELECT to_regclass('schema_migrations') AS t"));
        assert.equal(rows[0].t, null);
      }
      await held.release();
      const after = await runCli(['keys', 'list'], env);
      assert.equal(after.code, 0, explain(['keys', 'list'], after));
      assert.equal(after.stderr, '');
    });
  });
}

/**
 * How long `petstore keys list` went on after it first wrote to stderr (the line that says it waits, a
 * moment into the wait) until it exited; with its exit code.
 */
async function waitedAfterSaying(env: Record<string, string>): Promise<{ code: number | null; ms: number; stderr: string }> {
  const child = spawn(process.execPath, [CLI, 'keys', 'list'], { cwd: tmpdir(), env: cliEnv(env), stdio: ['ignore', 'ignore', 'pipe'] });
  killAtExit(child);
  let said: number | undefined;
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    said ??= performance.now();
    stderr += chunk;
  });
  const stuck = setTimeout(() => child.kill('SIGKILL'), 20_000); // far past either bound: a wait not bounded at all
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(stuck);
  return { code, ms: performance.now() - (said ?? performance.now()), stderr };
}

describe('sqlite: MIGRATION_LOCK_WAIT_MS bounds the wait for the write lock', () => {
  // Generous bounds, far apart: a wait fixed at any one time, or unbounded, fails one of the two.
  test('a start gives up near a wait of 1 s, and waits longer for a wait of 6 s', async (t) => {
    const file = join(tempDir(t), 'petstore.db');
    await holdSqliteWriteLock(t, file);
    const env = { DATABASE_URL: `sqlite:${file}`, PORT: '0' };
    const [short, long] = await Promise.all([
      waitedAfterSaying({ ...env, MIGRATION_LOCK_WAIT_MS: '1000' }),
      waitedAfterSaying({ ...env, MIGRATION_LOCK_WAIT_MS: '6000' }),
    ]);
    for (const [name, run, [least, most]] of [
      ['1 s', short, [200, 3000]],
      ['6 s', long, [4500, 9000]],
    ] as const) {
      assert.equal(run.code, 1, `MIGRATION_LOCK_WAIT_MS of ${name}: gave up\n${run.stderr}`);
      assert.ok(
        run.ms >= least && run.ms <= most,
        `MIGRATION_LOCK_WAIT_MS of ${name}: waited ${Math.round(run.ms)} ms after saying so, not ${least} to ${most}`,
      );
    }
  });
});
