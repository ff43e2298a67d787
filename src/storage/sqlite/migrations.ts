/**
 * Versioned schema migrations for SQLite. Each entry runs once, in order, inside a transaction,
 * and is recorded in schema_migrations. Append new versions; never edit a released one.
 */
import { inWriteTransaction, type Database } from './driver.ts';

const MIGRATIONS: readonly { version: number; name: string; sql: string }[] = [
  {
    version: 1,
    name: 'pets, api keys, bans and instance settings',
    sql: `
      CREATE TABLE pets (
        id          INTEGER PRIMARY KEY AUTOINCREMENT, -- AUTOINCREMENT: ids are never reused
        name        TEXT    NOT NULL,
        category_id INTEGER NOT NULL,
        status      TEXT    NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
      );
      CREATE INDEX pets_status_id ON pets (status, id);

      CREATE TABLE api_keys (
        id          TEXT    PRIMARY KEY,
        hash        TEXT    NOT NULL UNIQUE,
        prefix      TEXT    NOT NULL,
        environment TEXT    NOT NULL,
        plan        TEXT    NOT NULL,
        per_minute  INTEGER NOT NULL,
        per_day     INTEGER NOT NULL,
        label       TEXT,
        created_at  INTEGER NOT NULL,
        revoked_at  INTEGER
      );

      -- Temporary bans of keys that keep sending after 429; shared by every instance through the database.
      CREATE TABLE bans (
        key_id       TEXT    PRIMARY KEY REFERENCES api_keys (id),
        banned_until INTEGER NOT NULL,
        created_at   INTEGER NOT NULL
      );

      CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO settings (name, value) VALUES ('cursor_secret', lower(hex(randomblob(32))));
    `,
  },
  {
    version: 2,
    name: 'key expiry, for rotation with a grace period and for keys that end on a date',
    sql: `ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;`,
  },
  {
    version: 3,
    name: 'idempotency keys: the first response of a create, replayed for 24 hours',
    sql: `
      CREATE TABLE idempotency_keys (
        key_id          TEXT    NOT NULL,
        idempotency_key TEXT    NOT NULL,
        request_hash    TEXT    NOT NULL,
        created_at      INTEGER NOT NULL,
        status          INTEGER,
        body            TEXT,
        location        TEXT,
        PRIMARY KEY (key_id, idempotency_key)
      );
    `,
  },
  {
    version: 4,
    name: 'idempotency keys by age, for purging expired ones',
    sql: `CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);`,
  },
];

export function migrate(db: Database): void {
  // IMMEDIATE takes the write lock first (waiting up to busy_timeout), so two processes starting together
  // on a new file cannot both apply a version. Creating the bookkeeping table inside it matters too: as a
  // statement of its own it would read the schema and then upgrade to a write, and SQLite refuses such an
  // upgrade at once, without waiting, when another process wrote in between ("database is locked").
  inWriteTransaction(db, () => {
    db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
    const row = db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number | null };
    for (const m of MIGRATIONS) {
      if (m.version <= (row.v ?? 0)) continue;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        m.version,
        m.name,
        Date.now(),
      );
    }
  });
}

export const LATEST_SQLITE_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;
