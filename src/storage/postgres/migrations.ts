/**
 * PostgreSQL's schema migrations, under a transaction-scoped advisory lock (migration-lock.ts) so instances
 * starting together apply each once; DDL is transactional, so a failed version leaves no trace. Same versions
 * and names as sqlite/migrations.ts (a test compares them); append, never edit a released one.
 */
import type { Pool } from 'pg';
import type { MigrationWait } from '../migration-wait.ts';
import { beginHoldingMigrationLock } from './migration-lock.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const POSTGRES_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'pets, api keys, bans and instance settings',
    sql: `
      CREATE TABLE pets (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- a sequence: never reused
        name        text   NOT NULL,
        category_id bigint NOT NULL,
        status      text   NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
      );
      -- Keyset pagination with a status filter reads this index in order.
      CREATE INDEX pets_status_id ON pets (status, id);

      CREATE TABLE api_keys (
        id          text    PRIMARY KEY,
        hash        text    NOT NULL UNIQUE,
        prefix      text    NOT NULL,
        environment text    NOT NULL,
        plan        text    NOT NULL,
        per_minute  integer NOT NULL,
        per_day     integer NOT NULL,
        label       text,
        created_at  bigint  NOT NULL,
        revoked_at  bigint
      );

      CREATE TABLE bans (
        key_id       text   PRIMARY KEY REFERENCES api_keys (id),
        banned_until bigint NOT NULL,
        created_at   bigint NOT NULL
      );

      CREATE TABLE settings (name text PRIMARY KEY, value text NOT NULL);
      INSERT INTO settings (name, value)
        VALUES ('cursor_secret', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
    `,
  },
  {
    version: 2,
    // Named for both engines with version 6; a database that recorded it earlier keeps the shorter name,
    // which is harmless: the recorded versions, not their names, decide what runs.
    // No create is undone any more (a pet, once committed, stays): the token now only matches a batch's
    // rows to their callers (postgres/group-insert.ts). The name stays as released.
    name: 'create tokens, to undo creates whose outcome was lost with the connection (PostgreSQL only: SQLite has no connection to lose)',
    sql: `ALTER TABLE pets ADD COLUMN create_token text;`,
  },
  {
    version: 3,
    name: 'key expiry, for rotation with a grace period and for keys that end on a date',
    sql: `ALTER TABLE api_keys ADD COLUMN expires_at bigint;`,
  },
  {
    version: 4,
    name: 'idempotency keys: the first response of a create, replayed for 24 hours',
    sql: `
      CREATE TABLE idempotency_keys (
        key_id          text   NOT NULL,
        idempotency_key text   NOT NULL,
        request_hash    text   NOT NULL,
        created_at      bigint NOT NULL,
        status          integer,
        body            text,
        location        text,
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
    // ->> gives the stored body's id as the digits it was written with, so the cast to bigint is exact
    // over the whole int64 range. A finished response whose pet no longer exists cannot be replayed:
    // its key is forgotten, as an expired one is, rather than left looking unfinished.
    sql: `
      ALTER TABLE idempotency_keys ADD COLUMN pet_id bigint REFERENCES pets (id);
      UPDATE idempotency_keys SET pet_id = (body::json->>'id')::bigint
        WHERE status IS NOT NULL AND (body::json->>'id')::bigint IN (SELECT id FROM pets);
      DELETE FROM idempotency_keys WHERE status IS NOT NULL AND pet_id IS NULL;
      ALTER TABLE idempotency_keys DROP COLUMN status, DROP COLUMN body, DROP COLUMN location;
    `,
  },
  {
    version: 7,
    name: 'idempotency claim tokens: a create makes its pet only while its claim is still the one it holds',
    // A random token per unfinished claim, set when it is made or taken over (a fencing token) and
    // cleared when its pet is recorded. Claims made before this version have none: they are finished,
    // or are taken over once stale and get one then.
    sql: `ALTER TABLE idempotency_keys ADD COLUMN claim_token text;`,
  },
  {
    version: 8,
    name: 'key subjects: a key made by rotation shares the rate limits and bans of the key it replaces',
    // NULL means the key is its own subject, so existing keys need no backfill and a key written by an
    // older release, which knows nothing of the column, still means itself. Keys are never deleted.
    sql: `ALTER TABLE api_keys ADD COLUMN subject_id text REFERENCES api_keys (id);`,
  },
  {
    version: 9,
    name: 'key tags: which keys carry one, so that an instance knows at start the keys issued before tags',
    // false for every key already there, and for a key written by an older release, which knows nothing
    // of the column: neither carries a tag. A constant default rewrites no row.
    sql: `ALTER TABLE api_keys ADD COLUMN tagged boolean NOT NULL DEFAULT false;`,
  },
];

/**
 * Applies what is missing, in one transaction whose statements are bounded by `timeoutMs` each, once it
 * holds the migration lock: while another session holds that, for up to `wait.waitMs`.
 */
export async function migrate(pool: Pool, timeoutMs: number, wait: MigrationWait): Promise<void> {
  const client = await pool.connect();
  try {
    await beginHoldingMigrationLock(client, timeoutMs, wait);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`);
    // Every version not recorded, in order, as on SQLite (where a renumbered database can lack one).
    const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
    const applied = new Set(rows.map((r) => r.version));
    for (const m of POSTGRES_MIGRATIONS) {
      if (applied.has(m.version)) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

export const LATEST_POSTGRES_VERSION = POSTGRES_MIGRATIONS[POSTGRES_MIGRATIONS.length - 1]!.version;
