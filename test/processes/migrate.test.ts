/**
 * `petstore migrate` and MIGRATIONS=refuse, as processes on both engines: migrate applies what a database
 * lacks (a new one, one the previous release left at version 5) and says so in one line, says a current
 * or a newer database needs nothing, and waits for the migration lock another process holds; with
 * MIGRATIONS=refuse, `serve` and `keys` refuse a database that lacks migrations (one alone too, as a
 * normal release finds it), in words naming its version, the version needed and `petstore migrate`,
 * change nothing, and start on a current or newer one. On PostgreSQL a migration whose DDL waits 3 s
 * for a table lock (past the 2 s bound of the service's own statements) does not fail, a
 * MIGRATIONS=refuse start meanwhile waits for it and then serves, and MIGRATION_STATEMENT_TIMEOUT_MS
 * bounds such a wait.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { POSTGRES_MIGRATIONS } from '../../src/storage/postgres/migrations.ts';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.ts';
import { createTestDatabase, requirePostgres, untilWaitingOnLocks, withPostgres } from '../support/engines.ts';
import { holdMigrationLock, holdSqliteWriteLock, holdTableLock, type LockHolder } from '../support/lock-holders.ts';
import { BIG, oldPostgresDatabase, oldSqliteDatabase, previousPostgresDatabase, previousSqliteDatabase } from '../support/old-databases.ts';
import {
  explain,
  keysCreate,
  runCli,
  startServerProcess,
  type CliResult,
  type EnvOverrides,
  type ServerProcess,
} from '../support/processes.ts';
import { atEnd, tempDir } from '../support/temp.ts';
import { eventually, settledFlag } from '../support/waiting.ts';

const LATEST = SQLITE_MIGRATIONS.at(-1)!.version;

/** Longer than the 2 s that bounds the service's own statements (and SQLite's writes waiting for a lock). */
const PAST_THE_STATEMENT_BOUND_MS = 3000;

/** A database of one engine, as the tests see it from outside the command. */
interface Setup {
  env: EnvOverrides;
  /** How the command names it. */
  database: string;
  /** The versions it records, in order; none without a bookkeeping table. */
  versions(): Promise<number[]>;
  /** Makes it the previous release's database; its versions after `petstore migrate`, and what migrate applies. */
  makeOld(): Promise<{ at: number; applied: string }>;
  /** Makes it a database one migration behind this release, as a normal release finds it. */
  makePrevious(): Promise<void>;
  /** Records a version this release does not know, as a later release's migrate would. */
  recordLaterVersion(): Promise<unknown>;
  /** The migration lock held by another process, and the words for it in the waiting line. */
  holdMigrationLock(): Promise<{ held: LockHolder; words: string }>;
}

const ENGINES = {
  sqlite(t: TestContext): Setup | undefined {
    const file = join(tempDir(t), 'petstore.db');
    const withDb = <T>(work: (db: InstanceType<typeof DatabaseSync>) => T): T => {
      const db = new DatabaseSync(file);
      try {
        return work(db);
      } finally {
        db.close();
      }
    };
    return {
      env: { DATABASE_URL: `sqlite:${file}` },
      database: `the SQLite file ${file}`,
      versions: async () =>
        withDb((db) =>
          db.prepare("SELECT 1 FROM sqlite_schema WHERE name = 'schema_migrations'").get() === undefined
            ? []
            : (db.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as { version: number }[]).map((r) => r.version),
        ),
      // Its last version, 4 in its own numbering: 1, 3, 4 and 5 in today's, which lacks 2 (PostgreSQL's only).
      makeOld: async () => {
        oldSqliteDatabase(file, 4);
        return { at: 5, applied: 'migrations 2 and 6 to 9' };
      },
      makePrevious: async () => previousSqliteDatabase(file),
      recordLaterVersion: async () =>
        withDb((db) => db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(LATEST + 1, 'a later release', Date.now())),
      holdMigrationLock: async () => ({
        held: await holdSqliteWriteLock(t, file),
        words: `the write lock of the SQLite file ${file}, which another process (SQLite does not tell which) holds`,
      }),
    };
  },
  async postgres(t: TestContext): Promise<Setup | undefined> {
    if (!requirePostgres(t, 'petstore migrate on PostgreSQL')) return undefined;
    const { url } = await createTestDatabase(t);
    const parsed = new URL(url);
    return {
      env: { DATABASE_URL: url },
      database: `PostgreSQL at ${parsed.host}, database ${parsed.pathname.slice(1)}`,
      versions: async () =>
        withPostgres(url, async (c) => {
          if ((await c.query("SELECT to_regclass('schema_migrations') AS t")).rows[0].t === null) return [];
          return (await c.query('SELECT version FROM schema_migrations ORDER BY version')).rows.map((r) => r.version as number);
        }),
      makeOld: async () => {
        await oldPostgresDatabase(url);
        return { at: 5, applied: 'migrations 6 to 9' };
      },
      makePrevious: () => previousPostgresDatabase(url),
      recordLaterVersion: async () =>
        withPostgres(url, (c) => c.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [LATEST + 1, 'a later release', Date.now()])),
      holdMigrationLock: async () => {
        const held = await holdMigrationLock(t, url, 'session');
        const { pid, user, address } = held.session!;
        const from = address === null ? '' : `, from ${address}`;
        return {
          held,
          words: `the migration lock (PostgreSQL advisory lock 7316482105), which another session (pid ${pid}, application "lock-holder", user ${user}${from}) holds`,
        };
      },
    };
  },
};

/** The one line `petstore migrate` prints once it applied `what`, whatever the time it took. */
function migratedLine(database: string, from: string, what: string): RegExp {
  const escaped = `Migrated ${database} from ${from} to version ${LATEST}: applied ${what} in `.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped}(\\d+ ms|\\d+\\.\\d s)\\.\\n$`);
}

/** The refusal of a start under MIGRATIONS=refuse, on standard error. */
function refusal(database: string, at: string, missing: string): string {
  return (
    `petstore: ${database} is at ${at}; this release needs version ${LATEST} (${missing}). MIGRATIONS=refuse: it applies no ` +
    'migrations itself. Run petstore migrate with this DATABASE_URL, then start again\n'
  );
}

function assertRefused(command: string[], result: CliResult, expected: string): void {
  assert.equal(result.code, 1, explain(command, result));
  assert.equal(result.stderr, expected);
}

const REFUSE = { MIGRATIONS: 'refuse' };

for (const [name, setUp] of Object.entries(ENGINES)) {
  describe(`${name}: petstore migrate and MIGRATIONS=refuse`, () => {
    test('a new database: refused under MIGRATIONS=refuse, migrated by petstore migrate, then current', async (t) => {
      const setup = await setUp(t);
      if (!setup) return;
      const env = { ...setup.env, PORT: '0' };
      const refused = refusal(setup.database, 'schema version 0 (no schema yet)', `migrations 1 to ${LATEST}`);
      const [served, listed] = await Promise.all([
        runCli(['serve'], { ...env, ...REFUSE }),
        runCli(['keys', 'list'], { ...env, ...REFUSE }),
      ]);
      assertRefused(['serve'], served, refused);
      assertRefused(['keys', 'list'], listed, refused);
      assert.deepEqual(await setup.versions(), [], 'nothing applied');

      const migrated = await runCli(['migrate'], { ...env, ...REFUSE });
      assert.equal(migrated.code, 0, explain(['migrate'], migrated));
      assert.match(migrated.stdout, migratedLine(setup.database, 'a new database', `migrations 1 to ${LATEST}`));
      assert.equal(migrated.stderr, '');
      assert.deepEqual(
        await setup.versions(),
        SQLITE_MIGRATIONS.map((m) => m.version),
      );

      const again = await runCli(['migrate'], env);
      assert.equal(again.code, 0, explain(['migrate'], again));
      assert.equal(again.stdout, `${setup.database} is already at version ${LATEST}: nothing to apply.\n`);
      assert.equal(again.stderr, '');
    });

    test("the previous release's database: refused under MIGRATIONS=refuse and left as it was; migrate upgrades it; then it serves", async (t) => {
      const setup = await setUp(t);
      if (!setup) return;
      const { at, applied } = await setup.makeOld();
      const before = await setup.versions();
      const missing = `migrations ${name === 'sqlite' ? '2 and ' : ''}6 to ${LATEST}`;
      const refused = refusal(setup.database, `schema version ${at}`, missing);
      const env = { ...setup.env, ...REFUSE, PORT: '0' };
      const [served, created] = await Promise.all([runCli(['serve'], env), runCli(['keys', 'create', '--plan', 'free'], env)]);
      assertRefused(['serve'], served, refused);
      assertRefused(['keys', 'create'], created, refused);
      assert.equal(created.stdout, '');
      // Not even renumbered (SQLite): a refusal writes nothing.
      assert.deepEqual(await setup.versions(), before);

      const migrated = await runCli(['migrate'], env);
      assert.equal(migrated.code, 0, explain(['migrate'], migrated));
      assert.match(migrated.stdout, migratedLine(setup.database, `version ${at}`, applied));
      assert.deepEqual(
        await setup.versions(),
        POSTGRES_MIGRATIONS.map((m) => m.version),
      );

      // Current now: the keys command and the server start under MIGRATIONS=refuse, on the old data.
      const key = await keysCreate(env, '--plan', 'free');
      const server = await startServerProcess(env, { owner: t });
      const pet = await fetch(`${server.url}/v1/pets/${BIG.id}`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(pet.status, 200);
      assert.equal(await pet.text(), `{"id":${BIG.id},"name":"Big","categoryId":${BIG.categoryId},"status":"available"}`);
    });

    // A normal release adds exactly one migration: a refusal must not need two missing.
    test('a database one migration behind: refused under MIGRATIONS=refuse and left as it was; migrate applies that one', async (t) => {
      const setup = await setUp(t);
      if (!setup) return;
      await setup.makePrevious();
      const before = await setup.versions();
      assert.deepEqual(
        before,
        SQLITE_MIGRATIONS.slice(0, -1).map((m) => m.version),
      );
      const env = { ...setup.env, ...REFUSE, PORT: '0' };
      const refused = refusal(setup.database, `schema version ${LATEST - 1}`, `migration ${LATEST}`);
      const [served, listed] = await Promise.all([runCli(['serve'], env), runCli(['keys', 'list'], env)]);
      assertRefused(['serve'], served, refused);
      assertRefused(['keys', 'list'], listed, refused);
      assert.deepEqual(await setup.versions(), before, 'nothing applied');

      const migrated = await runCli(['migrate'], env);
      assert.equal(migrated.code, 0, explain(['migrate'], migrated));
      assert.match(migrated.stdout, migratedLine(setup.database, `version ${LATEST - 1}`, `migration ${LATEST}`));
      const server = await startServerProcess(env, { owner: t });
      assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    });

    test('a database ahead of this release: migrate applies nothing and says so; MIGRATIONS=refuse serves it', async (t) => {
      const setup = await setUp(t);
      if (!setup) return;
      const migrated = await runCli(['migrate'], setup.env);
      assert.equal(migrated.code, 0, explain(['migrate'], migrated));
      await setup.recordLaterVersion();

      const again = await runCli(['migrate'], setup.env);
      assert.equal(again.code, 0, explain(['migrate'], again));
      assert.equal(again.stdout, `${setup.database} is at version ${LATEST + 1}, ahead of this release's ${LATEST}: nothing to apply.\n`);
      const server = await startServerProcess({ ...setup.env, ...REFUSE }, { owner: t });
      assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    });

    test('while another process holds the migration lock, migrate waits past 2 s, says so once on stderr, then applies', async (t) => {
      const setup = await setUp(t);
      if (!setup) return;
      const { held, words } = await setup.holdMigrationLock();
      const migrating = runCli(['migrate'], setup.env, { timeoutMs: 60_000 });
      const settled = settledFlag(migrating);
      await sleep(PAST_THE_STATEMENT_BOUND_MS);
      assert.equal(settled(), false, 'still waiting while the lock is held');
      assert.deepEqual(await setup.versions(), [], 'nothing applied yet');

      await held.release();
      const migrated = await migrating;
      assert.equal(migrated.code, 0, explain(['migrate'], migrated));
      assert.match(migrated.stdout, migratedLine(setup.database, 'a new database', `migrations 1 to ${LATEST}`));
      assert.equal(migrated.stderr, `petstore: waiting for ${words}; waiting up to 300 s (MIGRATION_LOCK_WAIT_MS=300000)\n`);
    });
  });
}

describe('postgres: a migration that waits for a table lock', () => {
  /** The JSON log lines of a server that say it waits for the migration lock. */
  const waitLines = (output: string) =>
    output
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => (JSON.parse(line) as { msg: string }).msg)
      .filter((msg) => msg.startsWith('waiting for '));

  test('waits 3 s for it without failing, holding up the table meanwhile; a MIGRATIONS=refuse start waits for the migration, then serves', async (t) => {
    const setup = await ENGINES.postgres(t);
    if (!setup) return;
    const url = setup.env.DATABASE_URL!;
    await setup.makeOld();
    // Migration 6 alters idempotency_keys, which a long read holds.
    const reading = await holdTableLock(t, url, 'idempotency_keys');
    const started = Date.now();
    const migrating = runCli(['migrate'], setup.env, { timeoutMs: 60_000 });
    const observer = new pg.Client({ connectionString: url });
    await observer.connect();
    atEnd(t, () => observer.end());
    await untilWaitingOnLocks(observer, url, 1, 10_000);

    // The ALTER TABLE waits in the table's lock queue: whatever comes after it waits too, past the
    // service's 2 s per statement.
    const late = new pg.Client({ connectionString: url, statement_timeout: 500 });
    await late.connect();
    atEnd(t, () => late.end());
    await assert.rejects(late.query('SELECT count(*) FROM idempotency_keys'), /statement timeout/);

    let spawned: ServerProcess | undefined;
    const serving = startServerProcess({ ...setup.env, ...REFUSE }, { owner: t, onSpawn: (s) => (spawned = s), startWithinMs: 60_000 });
    void serving.catch(() => undefined); // awaited below
    await eventually(async () => spawned !== undefined && waitLines(spawned.stdout()).length > 0, 10_000, 50);
    await sleep(Math.max(0, started + PAST_THE_STATEMENT_BOUND_MS - Date.now()));
    assert.equal(spawned!.child.exitCode, null, 'the start still waits');

    await reading.release();
    const migrated = await migrating;
    assert.equal(migrated.code, 0, explain(['migrate'], migrated));
    assert.ok(Date.now() - started >= PAST_THE_STATEMENT_BOUND_MS);
    assert.match(migrated.stdout, migratedLine(setup.database, 'version 5', 'migrations 6 to 9'));
    assert.equal(migrated.stderr, '');
    const server = await serving;
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    const [waited] = waitLines(server.stdout());
    assert.match(
      waited!,
      /^waiting for the migration lock \(PostgreSQL advisory lock 7316482105\), which another session \(pid \d+, application "petstore", /,
    );
  });

  test('past MIGRATION_STATEMENT_TIMEOUT_MS, migrate and a migrating start exit 1 naming the migration and the setting; nothing is applied', async (t) => {
    const setup = await ENGINES.postgres(t);
    if (!setup) return;
    await setup.makeOld();
    const reading = await holdTableLock(t, setup.env.DATABASE_URL!, 'idempotency_keys');
    const env = { ...setup.env, MIGRATION_STATEMENT_TIMEOUT_MS: '1000', PORT: '0' };
    const failed =
      `petstore: ${setup.database}: migration 6 (${POSTGRES_MIGRATIONS[5]!.name}) failed: a statement ran (or waited for a lock) ` +
      'past MIGRATION_STATEMENT_TIMEOUT_MS=1000, the bound on each migration statement: raise it (0: no bound), or end what ' +
      'holds its table; nothing was applied, the database stays at version 5\n';
    const migrated = await runCli(['migrate'], env, { timeoutMs: 30_000 });
    assert.equal(migrated.code, 1, explain(['migrate'], migrated));
    assert.equal(migrated.stdout, '');
    assert.equal(migrated.stderr, failed);
    const served = await runCli(['serve'], env, { timeoutMs: 30_000 });
    assert.equal(served.code, 1, explain(['serve'], served));
    assert.equal(served.stderr, failed);
    assert.deepEqual(await setup.versions(), [1, 2, 3, 4, 5]);

    await reading.release();
    const again = await runCli(['migrate'], env);
    assert.equal(again.code, 0, explain(['migrate'], again));
    assert.match(again.stdout, migratedLine(setup.database, 'version 5', 'migrations 6 to 9'));
  });
});

describe('petstore migrate that cannot open the database', () => {
  test('exits 1 with one line naming the database and why: a file that is not a database, an unreachable PostgreSQL', async (t) => {
    const file = join(tempDir(t), 'notes.db');
    writeFileSync(file, 'not a database, only some notes\n'.repeat(200));
    const [sqlite, postgres] = await Promise.all([
      runCli(['migrate'], { DATABASE_URL: `sqlite:${file}` }),
      runCli(['migrate'], { DATABASE_URL: 'postgres://petstore:secret@127.0.0.1:1/petstore' }),
    ]);
    assert.equal(sqlite.code, 1, explain(['migrate'], sqlite));
    assert.equal(sqlite.stdout, '');
    assert.equal(sqlite.stderr, `petstore: DATABASE_URL names the SQLite file ${file}, which cannot be opened: file is not a database\n`);
    assert.equal(postgres.code, 1, explain(['migrate'], postgres));
    assert.equal(
      postgres.stderr,
      'petstore: DATABASE_URL names PostgreSQL at 127.0.0.1:1, database petstore, which cannot be used: connect ECONNREFUSED 127.0.0.1:1\n',
    );
  });
});
