/**
 * SQLite's schema migrations, each once, in order, in a transaction, recorded in schema_migrations. Same
 * versions and names as postgres/migrations.ts (a step this engine does not need has no SQL, and its name says
 * so); append, never edit a released one.
 */
import { migrationFailed, missingOf, SchemaBehindError, type MigrationOptions, type MigrationOutcome } from '../migration-mode.ts';
import type { MigrationWait } from '../migration-wait.ts';
import { inWriteTransaction, type Database } from './driver.ts';
import { beginHoldingWriteLock } from './migration-lock.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const SQLITE_MIGRATIONS: readonly Migration[] = [
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
    // On PostgreSQL no create is undone any more (a committed pet stays): the column only matches a
    // batch's rows to their callers there (postgres/group-insert.ts). The name stays as released.
    name: 'create tokens, to undo creates whose outcome was lost with the connection (PostgreSQL only: SQLite has no connection to lose)',
    sql: '',
  },
  {
    version: 3,
    name: 'key expiry, for rotation with a grace period and for keys that end on a date',
    sql: `ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;`,
  },
  {
    version: 4,
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
    version: 5,
    name: 'idempotency keys by age, for purging expired ones',
    sql: `CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);`,
  },
  {
    version: 6,
    name: 'idempotency keys name the created pet (pet_id) instead of storing its response',
    // json_extract reads the stored body's id as an INTEGER, exact over the whole int64 range. A
    // finished response whose pet no longer exists cannot be replayed: its key is forgotten, as an
    // expired one is, rather than left looking unfinished.
    sql: `
      ALTER TABLE idempotency_keys ADD COLUMN pet_id INTEGER REFERENCES pets (id);
      UPDATE idempotency_keys SET pet_id = json_extract(body, '$.id')
        WHERE status IS NOT NULL AND json_extract(body, '$.id') IN (SELECT id FROM pets);
      DELETE FROM idempotency_keys WHERE status IS NOT NULL AND pet_id IS NULL;
      ALTER TABLE idempotency_keys DROP COLUMN status;
      ALTER TABLE idempotency_keys DROP COLUMN body;
      ALTER TABLE idempotency_keys DROP COLUMN location;
    `,
  },
  {
    version: 7,
    name: 'idempotency claim tokens: a create makes its pet only while its claim is still the one it holds',
    // A random token per unfinished claim, set when it is made or taken over (a fencing token) and
    // cleared when its pet is recorded. Claims made before this version have none: they are finished,
    // or are taken over once stale and get one then.
    sql: `ALTER TABLE idempotency_keys ADD COLUMN claim_token TEXT;`,
  },
  {
    version: 8,
    name: 'key subjects: a key made by rotation shares the rate limits and bans of the key it replaces',
    // NULL means the key is its own subject, so existing keys need no backfill and a key written by an
    // older release, which knows nothing of the column, still means itself. Keys are never deleted.
    sql: `ALTER TABLE api_keys ADD COLUMN subject_id TEXT REFERENCES api_keys (id);`,
  },
  {
    version: 9,
    name: 'key tags: which keys carry one, so that an instance knows at start the keys issued before tags',
    // 0 for every key already there, and for a key written by an older release, which knows nothing of
    // the column: neither carries a tag.
    sql: `ALTER TABLE api_keys ADD COLUMN tagged INTEGER NOT NULL DEFAULT 0 CHECK (tagged IN (0, 1));`,
  },
];

/** Version 2's recorded name in databases numbered before SQLite took PostgreSQL's version 2. */
const OLD_VERSION_2 = 'key expiry, for rotation with a grace period and for keys that end on a date';

/**
 * SQLite once lacked PostgreSQL's version 2, so its 2, 3, 4 are today's 3, 4, 5: a database recognised by the
 * name it recorded for 2 has those rows moved up, highest first; the missing step then applies like any other.
 */
function renumberOldVersions(db: Database): void {
  const second = db.prepare('SELECT name FROM schema_migrations WHERE version = 2').get() as { name: string } | undefined;
  if (second?.name !== OLD_VERSION_2) return;
  const moved = db.prepare('SELECT version FROM schema_migrations WHERE version >= 2 ORDER BY version DESC').all();
  const move = db.prepare('UPDATE schema_migrations SET version = ? WHERE version = ?');
  for (const { version } of moved as { version: number }[]) move.run(version + 1, version);
}

/** The versions the database records; none when it has no bookkeeping table yet. */
function recordedVersions(db: Database): Set<number> {
  const table = db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (table === undefined) return new Set();
  renumberOldVersions(db);
  return new Set((db.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map((r) => r.version));
}

/**
 * Applies what is missing to the database in `file` (MIGRATIONS=apply), or refuses a database that lacks
 * any (refuse), once it holds the write lock: for up to `wait.waitMs` while another process does. A
 * refusal rolls back, renumbering included: it writes nothing. No statement of a migration has a bound
 * of its own: with the write lock held, none waits for another process.
 */
export function migrate(db: Database, file: string, wait: MigrationWait, migrations: MigrationOptions): MigrationOutcome {
  // IMMEDIATE takes the write lock first, so two processes starting together on a new file cannot both
  // apply a version. Creating the bookkeeping table inside it matters too: as a statement of its own it
  // would read the schema and then upgrade to a write, and SQLite refuses such an upgrade at once,
  // without waiting, when another process wrote in between ("database is locked").
  const apply = (): MigrationOutcome => {
    // Every version not recorded, in order (not only those above the highest): a renumbered database
    // lacks version 2 below versions it has.
    const recorded = recordedVersions(db);
    const { from, missing } = missingOf(
      recorded,
      SQLITE_MIGRATIONS.map((m) => m.version),
    );
    if (missing.length > 0 && migrations.mode === 'refuse') throw new SchemaBehindError(from, LATEST_SQLITE_VERSION, missing);
    if (missing.length > 0) {
      db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
    }
    const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    for (const m of SQLITE_MIGRATIONS) {
      if (recorded.has(m.version)) continue;
      try {
        if (m.sql) db.exec(m.sql);
      } catch (err) {
        throw migrationFailed(m.version, m.name, from, (err as Error).message, err);
      }
      record.run(m.version, m.name, Date.now());
    }
    return { from, to: Math.max(from, ...missing), latest: LATEST_SQLITE_VERSION, applied: missing };
  };
  const outcome = inWriteTransaction(db, apply, () => beginHoldingWriteLock(db, file, wait));
  migrations.onOutcome?.(outcome);
  return outcome;
}

export const LATEST_SQLITE_VERSION = SQLITE_MIGRATIONS[SQLITE_MIGRATIONS.length - 1]!.version;
