/**
 * Databases as the previous release left them, for the upgrade tests (storage/migrations.test.ts) and
 * `petstore migrate` (processes/migrate.test.ts): SQLite in its old numbering, at any of its versions, and
 * PostgreSQL at version 5, each with a pet whose id is above 2^53, a banned key with an expiry, and
 * idempotency keys that stored whole responses. And a database one migration behind this release, as
 * a normal release finds it.
 */
import pg from 'pg';
import type { Pet } from '../../src/domain/pet.ts';
import { requestHash } from '../../src/services/idempotent-creates.ts';
import { POSTGRES_MIGRATIONS } from '../../src/storage/postgres/migrations.ts';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.ts';

export const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);
export const HOUR = 3_600_000;

/** The pet whose create was stored as a finished response: its id is above 2^53, so a double would round it. */
export const BIG: Pet = { id: 9007199254740993n, name: 'Big', categoryId: 9223372036854775807n, status: 'available' };
export const BIG_BODY = '{"id":9007199254740993,"name":"Big","categoryId":9223372036854775807,"status":"available"}';
export const SMALL: Pet = { id: 7n, name: 'Small', categoryId: 1n, status: 'sold' };

/** The names the previous release recorded, in its own numbering on each engine. */
export const OLD_NAMES = {
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
export const OLD_CLAIMS = [
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

/** The previous release's schema, versions 1 to `upTo` in its numbering (1 base, 2 expiry, 3 and 4 idempotency). */
export function oldSqliteDatabase(path: string, upTo: number): void {
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

/** The previous release's PostgreSQL schema at its version 5, written into the (empty) database at url. */
export async function oldPostgresDatabase(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
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
  } finally {
    await client.end();
  }
}

/** This release's migrations but its last, as the previous release applied and recorded them. */
const allButLast = <M>(migrations: readonly M[]): M[] => migrations.slice(0, -1);

/** A SQLite file at the version before this release's latest: a normal release lacks exactly one migration. */
export function previousSqliteDatabase(path: string): void {
  const db = new DatabaseSync(path);
  try {
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    for (const m of allButLast(SQLITE_MIGRATIONS)) {
      if (m.sql) db.exec(m.sql);
      record.run(m.version, m.name, NOW);
    }
  } finally {
    db.close();
  }
}

/** The (empty) PostgreSQL database at url brought to the version before this release's latest. */
export async function previousPostgresDatabase(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)');
    for (const m of allButLast(POSTGRES_MIGRATIONS)) {
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [m.version, m.name, NOW]);
    }
  } finally {
    await client.end();
  }
}
