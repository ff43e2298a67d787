/**
 * Schema migrations across engines and releases: both engines list the same versions with the same
 * names, and a database left by the previous release (SQLite with its old numbering, PostgreSQL at
 * version 5, each with idempotency keys that stored whole responses) upgrades to the latest version,
 * keeps its pets, keys and bans, and replays a finished idempotency key from the pet its stored
 * response named, with an id above 2^53 kept exact. Opening PostgreSQL while another session holds the
 * migration lock waits for it, also through PgBouncer (the PgBouncer pass runs this file again), up to
 * its bound (processes/migration-wait.test.ts: the same through `petstore serve` and `keys`, and on SQLite);
 * a migration whose DDL waits for a table lock waits past the 2 s bound of the service's statements, up to
 * its own (processes/migrate.test.ts: the same through `petstore migrate`).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { CLAIM_STALE_MS, IdempotentCreates } from '../../src/services/idempotent-creates.ts';
import { DEFAULT_MIGRATIONS, MigrationError, type MigrationOutcome } from '../../src/storage/migration-mode.ts';
import { MigrationLockTimeoutError } from '../../src/storage/migration-wait.ts';
import { MIGRATION_LOCK } from '../../src/storage/postgres/migration-lock.ts';
import { POSTGRES_MIGRATIONS } from '../../src/storage/postgres/migrations.ts';
import { openPostgresStore } from '../../src/storage/postgres/store.ts';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import type { Store } from '../../src/storage/store.ts';
import { createTestDatabase, openTestPostgresStore, requirePostgres, withPostgres } from '../support/engines.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { holdMigrationLock, holdTableLock, type LockHolder } from '../support/lock-holders.ts';
import { BIG, HOUR, NOW, oldPostgresDatabase, oldSqliteDatabase, SMALL } from '../support/old-databases.ts';
import { atEnd, tempDir } from '../support/temp.ts';
import { eventually, settledFlag } from '../support/waiting.ts';

/** What a database upgraded from the old shape must hold, whatever the engine. */
async function assertUpgraded(store: Store): Promise<void> {
  assert.deepEqual(await store.getPet(BIG.id), BIG);
  assert.deepEqual(await store.getPet(SMALL.id), SMALL);
  // A key of the old release is its own subject (subject_id NULL), so its ban and counts stay its own.
  assert.deepEqual(
    (await store.listKeys()).map((k) => [k.id, k.expiresAt?.getTime() ?? null, k.subjectId]),
    [['key_old', NOW + 30 * 24 * HOUR, 'key_old']],
  );
  assert.equal(await store.banEndOf('key_old', NOW), NOW + HOUR);
  assert.equal(await store.cursorSecret(), 'old-secret');
  // Issued before key tags: the key has none, and an instance starting now knows it exists.
  assert.deepEqual(await store.untaggedKeyHashes('production'), ['old-hash']);

  const creates = new IdempotentCreates({ store, clock: new FakeClock(NOW), onPurgeError: (err) => assert.fail(String(err)) });
  const scope = (idempotencyKey: string) => ({ keyId: 'key_old', idempotencyKey });
  assert.deepEqual(await creates.create(scope('finished'), { name: BIG.name, categoryId: BIG.categoryId, status: BIG.status }), {
    outcome: 'replayed',
    pet: BIG,
  });
  // Unfinished and without a token (made before claims had one): in flight until it may be taken over,
  // and then taken over with a token of its own, so the retry creates.
  const small = { name: 'Small', categoryId: 1n, status: 'sold' } as const;
  assert.deepEqual(await creates.create(scope('unfinished'), small), { outcome: 'in_flight', retryInMs: CLAIM_STALE_MS - 1000 });
  const later = new IdempotentCreates({
    store,
    clock: new FakeClock(NOW - 1000 + CLAIM_STALE_MS),
    onPurgeError: (err) => assert.fail(String(err)),
  });
  assert.equal((await later.create(scope('unfinished'), small)).outcome, 'created');
  const fresh = await creates.create(scope('orphaned'), { name: 'New', categoryId: 2n, status: 'pending' });
  assert.equal(fresh.outcome, 'created', 'a finished key whose pet is gone was forgotten');
}

describe('migration lists', () => {
  test('both engines have the same versions, 1 to n, with the same names', () => {
    const list = (migrations: readonly { version: number; name: string }[]) => migrations.map(({ version, name }) => ({ version, name }));
    assert.deepEqual(list(SQLITE_MIGRATIONS), list(POSTGRES_MIGRATIONS));
    assert.deepEqual(
      SQLITE_MIGRATIONS.map((m) => m.version),
      SQLITE_MIGRATIONS.map((_, i) => i + 1),
    );
  });
});

describe('SQLite: a database of the previous release', () => {
  function recorded(path: string): { version: number; name: string; applied_at: number }[] {
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      return db.prepare('SELECT version, name, applied_at FROM schema_migrations ORDER BY version').all() as never;
    } finally {
      db.close();
    }
  }

  test('at its last version (4, old numbering): renumbered, upgraded, and the finished key replays its pet', async (t) => {
    const path = join(tempDir(t), 'petstore.db');
    oldSqliteDatabase(path, 4);
    const before = Date.now();
    const store = openSqliteStore({ path, synchronous: 'normal' });
    try {
      const rows = recorded(path);
      assert.deepEqual(
        rows.map((r) => [r.version, r.name]),
        SQLITE_MIGRATIONS.map((m) => [m.version, m.name]),
      );
      // The old versions moved to their new numbers with the moment they were applied; 2, 6, 7, 8 and 9 are new.
      assert.deepEqual(
        [1, 3, 4, 5].map((v) => rows.find((r) => r.version === v)!.applied_at),
        [1001, 1002, 1003, 1004],
      );
      for (const v of [2, 6, 7, 8, 9]) assert.ok(rows.find((r) => r.version === v)!.applied_at >= before);

      const db = new DatabaseSync(path, { readOnly: true });
      try {
        const columns = (db.prepare('PRAGMA table_info(idempotency_keys)').all() as { name: string }[]).map((c) => c.name);
        assert.deepEqual(columns, ['key_id', 'idempotency_key', 'request_hash', 'created_at', 'pet_id', 'claim_token']);
      } finally {
        db.close();
      }
      await assertUpgraded(store);
      // Ids go on above the old ones, exactly: the forgotten key and the taken-over one created BIG.id + 1 and + 2.
      assert.equal((await store.createPet({ name: 'Next', categoryId: 1n, status: 'available' })).id, BIG.id + 3n);
    } finally {
      await store.close();
    }
    // Opening again applies nothing and renumbers nothing.
    const again = openSqliteStore({ path, synchronous: 'normal' });
    await again.close();
    assert.deepEqual(
      recorded(path).map((r) => r.version),
      SQLITE_MIGRATIONS.map((m) => m.version),
    );
  });

  test('at its version 2 (key expiry, old numbering): renumbered, then every later version applied once', async (t) => {
    const path = join(tempDir(t), 'petstore.db');
    oldSqliteDatabase(path, 2);
    const store = openSqliteStore({ path, synchronous: 'normal' });
    try {
      const rows = recorded(path);
      assert.deepEqual(
        rows.map((r) => [r.version, r.name]),
        SQLITE_MIGRATIONS.map((m) => [m.version, m.name]),
      );
      assert.equal(rows.find((r) => r.version === 3)!.applied_at, 1002);
      assert.equal((await store.listKeys())[0]!.expiresAt?.getTime(), NOW + 30 * 24 * HOUR);
      assert.deepEqual(await store.getPet(BIG.id), BIG);
    } finally {
      await store.close();
    }
  });
});

describe('PostgreSQL: a database of the previous release', () => {
  test('at version 5: upgraded, stored responses become pet ids, and the finished key replays its pet', async (t) => {
    if (!requirePostgres(t, 'the PostgreSQL upgrade from version 5')) return;
    const database = await createTestDatabase(t);
    await oldPostgresDatabase(database.url);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const store = await openTestPostgresStore(database.url);
      try {
        const { rows } = await client.query('SELECT version, name, applied_at FROM schema_migrations ORDER BY version');
        assert.deepEqual(
          rows.map((r) => r.version),
          POSTGRES_MIGRATIONS.map((m) => m.version),
        );
        assert.deepEqual(
          rows.slice(0, 5).map((r) => Number(r.applied_at)),
          [1001, 1002, 1003, 1004, 1005],
          'applied versions untouched',
        );
        assert.equal(rows[5].name, POSTGRES_MIGRATIONS[5]!.name);
        const columns = await client.query(
          "SELECT column_name FROM information_schema.columns WHERE table_name = 'idempotency_keys' ORDER BY ordinal_position",
        );
        assert.deepEqual(
          columns.rows.map((r) => r.column_name),
          ['key_id', 'idempotency_key', 'request_hash', 'created_at', 'pet_id', 'claim_token'],
        );
        await assertUpgraded(store);
      } finally {
        await store.close();
      }
    } finally {
      await client.end();
    }
  });
});

describe('PostgreSQL: opening while another session holds the migration lock', () => {
  /** Who holds it, as opening names them: through PgBouncer, the server connection the holder's transaction runs on. */
  const holderOf = ({ session }: LockHolder) =>
    `another session (pid ${session!.pid}, application "lock-holder", user ${session!.user}` +
    `${session!.address === null ? '' : `, from ${session!.address}`})`;

  test('waits past the per-statement bound, says so once naming the lock and its holder, and opens once it is released', async (t) => {
    if (!requirePostgres(t, 'waiting for the PostgreSQL migration lock')) return;
    const database = await createTestDatabase(t);
    // As a migrating start holds it: in a transaction, which keeps its server connection through a pooler.
    const held = await holdMigrationLock(t, database.url, 'transaction');
    const told: string[] = [];
    const opening = openPostgresStore({ url: database.url, poolSize: 2, migrationWait: { waitMs: 120_000, onWait: (m) => told.push(m) } });
    void opening.then(
      (store) => atEnd(t, () => store.close()),
      () => undefined, // the await below reports it
    );
    const settled = settledFlag(opening);
    await eventually(async () => told.length > 0, 10_000, 50);
    // Every statement is bounded by 2 s (the client's query timeout): a wait made of one statement would end here.
    await sleep(4000);
    assert.equal(settled(), false, 'still waiting while the lock is held');

    await held.release();
    const store = await opening;
    assert.deepEqual(told, [
      `waiting for the migration lock (PostgreSQL advisory lock ${MIGRATION_LOCK}), which ${holderOf(held)} holds; ` +
        'waiting up to 120 s (MIGRATION_LOCK_WAIT_MS=120000)',
    ]);
    assert.equal((await store.createPet({ name: 'After the wait', categoryId: 1n, status: 'available' })).name, 'After the wait');
    const { rows } = await withPostgres(database.url, (c) => c.query('SELECT max(version) AS v FROM schema_migrations'));
    assert.equal(rows[0].v, POSTGRES_MIGRATIONS.at(-1)!.version);
  });

  test('holds nothing once opened: the lock ends with the migration transaction, so no pooled server connection keeps it', async (t) => {
    if (!requirePostgres(t, 'the PostgreSQL migration lock after opening')) return;
    const database = await createTestDatabase(t);
    const store = await openTestPostgresStore(database.url);
    atEnd(t, () => store.close());
    const { rows } = await withPostgres(database.url, (c) =>
      c.query(
        `SELECT count(*)::int AS n FROM pg_locks
          WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      ),
    );
    assert.equal(rows[0].n, 0);
  });

  test('gives up once its bound has passed, naming the lock, its holder, the wait and the setting; nothing is applied', async (t) => {
    if (!requirePostgres(t, 'giving up on the PostgreSQL migration lock')) return;
    const database = await createTestDatabase(t);
    const held = await holdMigrationLock(t, database.url, 'transaction');
    const told: string[] = [];
    const opening = openPostgresStore({ url: database.url, poolSize: 2, migrationWait: { waitMs: 1000, onWait: (m) => told.push(m) } });
    const before = 'gave up after ';
    const after =
      ` s waiting for the migration lock (PostgreSQL advisory lock ${MIGRATION_LOCK}), which ${holderOf(held)} still holds; ` +
      'MIGRATION_LOCK_WAIT_MS=1000 bounds the wait: start again once it is released, or raise MIGRATION_LOCK_WAIT_MS';
    await assert.rejects(opening, (err: Error) => {
      assert.ok(err instanceof MigrationLockTimeoutError, String(err));
      assert.ok(err.message.startsWith(before) && err.message.endsWith(after), `${err.message}\n  should be\n${before}N${after}`);
      assert.ok(Number(err.message.slice(before.length, -after.length)) >= 1, err.message);
      return true;
    });
    assert.equal(told.length, 1, 'said once that it waits');
    await held.release();
    const { rows } = await withPostgres(database.url, (c) => c.query("SELECT to_regclass('schema_migrations') AS t"));
    assert.equal(rows[0].t, null, 'nothing applied');
  });
});

describe('PostgreSQL: a migration that waits for a table lock', () => {
  test('waits past the 2 s bound of the service statements without failing, also through PgBouncer', async (t) => {
    if (!requirePostgres(t, 'a PostgreSQL migration waiting for a table lock')) return;
    const database = await createTestDatabase(t);
    await oldPostgresDatabase(database.url);
    // Migration 6 alters idempotency_keys, which a long read holds.
    const reading = await holdTableLock(t, database.url, 'idempotency_keys');
    const outcomes: MigrationOutcome[] = [];
    const opening = openPostgresStore({
      url: database.url,
      poolSize: 2,
      migrations: { ...DEFAULT_MIGRATIONS, onOutcome: (o) => outcomes.push(o) },
    });
    void opening.then(
      (store) => atEnd(t, () => store.close()),
      () => undefined, // the await below reports it
    );
    const settled = settledFlag(opening);
    await sleep(3000);
    assert.equal(settled(), false, 'still waiting for the table');
    await reading.release();
    await opening;
    assert.deepEqual(outcomes, [{ from: 5, to: 9, latest: 9, applied: [6, 7, 8, 9] }]);
  });

  test('past its own bound, gives up with an error naming the migration and the setting; nothing is applied', async (t) => {
    if (!requirePostgres(t, 'a PostgreSQL migration past MIGRATION_STATEMENT_TIMEOUT_MS')) return;
    const database = await createTestDatabase(t);
    await oldPostgresDatabase(database.url);
    const reading = await holdTableLock(t, database.url, 'idempotency_keys');
    const opening = openPostgresStore({ url: database.url, poolSize: 2, migrations: { mode: 'apply', statementTimeoutMs: 500 } });
    await assert.rejects(opening, (err: Error) => {
      assert.ok(err instanceof MigrationError, String(err));
      assert.match(
        err.message,
        /^the database: migration 6 \(.*\) failed: .* past MIGRATION_STATEMENT_TIMEOUT_MS=500, .* stays at version 5$/,
      );
      return true;
    });
    await reading.release();
    const { rows } = await withPostgres(database.url, (c) => c.query('SELECT max(version) AS v FROM schema_migrations'));
    assert.equal(rows[0].v, 5);
  });
});
