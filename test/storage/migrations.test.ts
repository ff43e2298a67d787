/**
 * Schema migrations across engines and releases: both engines list the same versions with the same
 * names, and a database left by the previous release (SQLite with its old numbering, PostgreSQL at
 * version 5, each with idempotency keys that stored whole responses) upgrades to the latest version,
 * keeps its pets, keys and bans, and replays a finished idempotency key from the pet its stored
 * response named, with an id above 2^53 kept exact. Opening PostgreSQL while another session holds the
 * migration lock waits for it, also through PgBouncer (the PgBouncer pass runs this file again), up to
 * its bound (processes/migration-wait.test.ts: the same through `petstore serve` and `keys`, and on SQLite).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Pet } from '../../src/domain/pet.ts';
import { CLAIM_STALE_MS, IdempotentCreates, requestHash } from '../../src/services/idempotent-creates.ts';
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
import { holdMigrationLock, type LockHolder } from '../support/lock-holders.ts';
import { atEnd, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);
const HOUR = 3_600_000;

/** The pet whose create was stored as a finished response: its id is above 2^53, so a double would round it. */
const BIG: Pet = { id: 9007199254740993n, name: 'Big', categoryId: 9223372036854775807n, status: 'available' };
const BIG_BODY = '{"id":9007199254740993,"name":"Big","categoryId":9223372036854775807,"status":"available"}';
const SMALL: Pet = { id: 7n, name: 'Small', categoryId: 1n, status: 'sold' };

/** The names the previous release recorded, in its own numbering on each engine. */
const OLD_NAMES = {
  base: 'pets, api keys, bans and instance settings',
  createTokens: 'create tokens, to undo creates whose outcome was lost with the connection',
  expiry: 'key expiry, for rotation with a grace period and for keys that end on a date',
  idempotency: 'idempotency keys: the first response of a create, replayed for 24 hours',
  index: 'idempotency keys by age, for purging expired ones',
};

/**
 * The idempotency rows of the old shape: a finished create of BIG, a request still creating, and a
 * finished create whose pet is gone (deleted by hand), which can no longer be replayed.
 */
const OLD_CLAIMS = [
  { key: 'finished', hash: requestHash(BIG), createdAt: NOW - HOUR, status: 201, body: BIG_BODY, location: `/v1/pets/${BIG.id}` },
  { key: 'unfinished', hash: requestHash(SMALL), createdAt: NOW - 1000, status: null, body: null, location: null },
  {
    key: 'orphaned',
    hash: 'x',
    createdAt: NOW - HOUR,
    status: 201,
    body: '{"id":99,"name":"Gone","categoryId":1,"status":"sold"}',
    location: '/v1/pets/99',
  },
];

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
  /** The previous release's schema, versions 1 to `upTo` in its numbering (1 base, 2 expiry, 3 and 4 idempotency). */
  function oldSqliteDatabase(path: string, upTo: number): void {
    const db = new DatabaseSync(path);
    try {
      db.exec('PRAGMA journal_mode = WAL');
      db.exec(`
        CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
        CREATE TABLE pets (
          id          INTEGER PRIMARY KEY AUTOINCREMENT,
          name        TEXT    NOT NULL,
          category_id INTEGER NOT NULL,
          status      TEXT    NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
        );
        CREATE INDEX pets_status_id ON pets (status, id);
        CREATE TABLE api_keys (
          id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, environment TEXT NOT NULL, plan TEXT NOT NULL,
          per_minute INTEGER NOT NULL, per_day INTEGER NOT NULL, label TEXT, created_at INTEGER NOT NULL, revoked_at INTEGER
        );
        CREATE TABLE bans (key_id TEXT PRIMARY KEY REFERENCES api_keys (id), banned_until INTEGER NOT NULL, created_at INTEGER NOT NULL);
        CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO settings (name, value) VALUES ('cursor_secret', 'old-secret');
      `);
      const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
      record.run(1, OLD_NAMES.base, 1001);
      const pet = db.prepare('INSERT INTO pets (id, name, category_id, status) VALUES (?, ?, ?, ?)');
      pet.setReadBigInts(true); // run() reports the inserted rowid, above 2^53 here
      for (const p of [SMALL, BIG]) pet.run(p.id, p.name, p.categoryId, p.status);
      db.prepare(
        `INSERT INTO api_keys (id, hash, prefix, environment, plan, per_minute, per_day, label, created_at)
        VALUES ('key_old', 'old-hash', 'pet_live_old', 'production', 'free', 60, 1000, NULL, 1)`,
      ).run();
      db.prepare('INSERT INTO bans (key_id, banned_until, created_at) VALUES (?, ?, ?)').run('key_old', NOW + HOUR, NOW);
      if (upTo < 2) return;
      db.exec('ALTER TABLE api_keys ADD COLUMN expires_at INTEGER');
      db.prepare('UPDATE api_keys SET expires_at = ?').run(NOW + 30 * 24 * HOUR);
      record.run(2, OLD_NAMES.expiry, 1002);
      if (upTo < 3) return;
      db.exec(`CREATE TABLE idempotency_keys (
        key_id TEXT NOT NULL, idempotency_key TEXT NOT NULL, request_hash TEXT NOT NULL, created_at INTEGER NOT NULL,
        status INTEGER, body TEXT, location TEXT, PRIMARY KEY (key_id, idempotency_key))`);
      const claim = db.prepare('INSERT INTO idempotency_keys VALUES (?, ?, ?, ?, ?, ?, ?)');
      for (const c of OLD_CLAIMS) claim.run('key_old', c.key, c.hash, c.createdAt, c.status, c.body, c.location);
      record.run(3, OLD_NAMES.idempotency, 1003);
      if (upTo < 4) return;
      db.exec('CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)');
      record.run(4, OLD_NAMES.index, 1004);
    } finally {
      db.close();
    }
  }

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
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      await client.query(`
        CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL);
        CREATE TABLE pets (
          id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          name        text   NOT NULL,
          category_id bigint NOT NULL,
          status      text   NOT NULL CHECK (status IN ('available', 'pending', 'sold')),
          create_token text
        );
        CREATE INDEX pets_status_id ON pets (status, id);
        CREATE TABLE api_keys (
          id text PRIMARY KEY, hash text NOT NULL UNIQUE, prefix text NOT NULL, environment text NOT NULL, plan text NOT NULL,
          per_minute integer NOT NULL, per_day integer NOT NULL, label text, created_at bigint NOT NULL, revoked_at bigint,
          expires_at bigint
        );
        CREATE TABLE bans (key_id text PRIMARY KEY REFERENCES api_keys (id), banned_until bigint NOT NULL, created_at bigint NOT NULL);
        CREATE TABLE settings (name text PRIMARY KEY, value text NOT NULL);
        INSERT INTO settings (name, value) VALUES ('cursor_secret', 'old-secret');
        CREATE TABLE idempotency_keys (
          key_id text NOT NULL, idempotency_key text NOT NULL, request_hash text NOT NULL, created_at bigint NOT NULL,
          status integer, body text, location text, PRIMARY KEY (key_id, idempotency_key)
        );
        CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
      `);
      const names = [OLD_NAMES.base, OLD_NAMES.createTokens, OLD_NAMES.expiry, OLD_NAMES.idempotency, OLD_NAMES.index];
      for (const [i, name] of names.entries()) {
        await client.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [i + 1, name, 1001 + i]);
      }
      for (const p of [SMALL, BIG]) {
        await client.query('INSERT INTO pets (id, name, category_id, status) OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4)', [
          p.id.toString(),
          p.name,
          p.categoryId.toString(),
          p.status,
        ]);
      }
      await client.query(
        `INSERT INTO api_keys (id, hash, prefix, environment, plan, per_minute, per_day, label, created_at, expires_at)
        VALUES ('key_old', 'old-hash', 'pet_live_old', 'production', 'free', 60, 1000, NULL, 1, $1)`,
        [NOW + 30 * 24 * HOUR],
      );
      await client.query('INSERT INTO bans VALUES ($1, $2, $3)', ['key_old', NOW + HOUR, NOW]);
      for (const c of OLD_CLAIMS) {
        await client.query('INSERT INTO idempotency_keys VALUES ($1, $2, $3, $4, $5, $6, $7)', [
          'key_old',
          c.key,
          c.hash,
          c.createdAt,
          c.status,
          c.body,
          c.location,
        ]);
      }

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
    let settled = false;
    void opening
      .then(
        (store) => atEnd(t, () => store.close()),
        () => undefined, // the await below reports it
      )
      .finally(() => (settled = true));
    await eventually(async () => told.length > 0, 10_000, 50);
    // Every statement is bounded by 2 s (the client's query timeout): a wait made of one statement would end here.
    await sleep(4000);
    assert.equal(settled, false, 'still waiting while the lock is held');

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
