/**
 * PostgreSQL's schema migrations, under a transaction-scoped advisory lock (migration-lock.ts) so instances
 * starting together apply each once; DDL is transactional, so a failed version leaves no trace. Same versions
 * and names as sqlite/migrations.ts (a test compares them); append, never edit a released one.
 */
import type pg from 'pg';
import type { Pool } from 'pg';
import {
  migrationFailed,
  missingOf,
  SchemaBehindError,
  STATEMENT_TIMEOUT_SETTING,
  type MigrationOptions,
  type MigrationOutcome,
} from '../migration-mode.ts';
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

/** setTimeout's longest delay: a migration statement has no bound of the client's (the server's statement_timeout bounds it). */
const NO_CLIENT_BOUND_MS = 2 ** 31 - 1;

/** The versions the database records; none when it has no bookkeeping table yet. */
async function recordedVersions(client: pg.ClientBase): Promise<Set<number>> {
  const { rows: table } = await client.query<{ present: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS present");
  if (!table[0]!.present) return new Set();
  const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
  return new Set(rows.map((r) => r.version));
}

/** PostgreSQL's words for a statement its statement_timeout ended (SQLSTATE 57014 is any cancel). */
function endedByStatementTimeout(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === '57014' && /statement timeout/.test(e.message ?? '');
}

/**
 * Applies what is missing (MIGRATIONS=apply), or refuses a database that lacks any (refuse), in one
 * transaction once it holds the migration lock: while another session holds that, for up to
 * `wait.waitMs`, each try's statements bounded by `timeoutMs`. The migrations' own statements are
 * bounded by `migrations.statementTimeoutMs` each instead (0: none): a DDL statement may wait for a table
 * lock, or build an index, far longer than a request's statement may take.
 */
export async function migrate(pool: Pool, timeoutMs: number, wait: MigrationWait, migrations: MigrationOptions): Promise<MigrationOutcome> {
  const client = await pool.connect();
  try {
    await beginHoldingMigrationLock(client, timeoutMs, wait);
    // Every version not recorded, in order, as on SQLite (where a renumbered database can lack one).
    const recorded = await recordedVersions(client);
    const { from, missing } = missingOf(
      recorded,
      POSTGRES_MIGRATIONS.map((m) => m.version),
    );
    if (missing.length > 0 && migrations.mode === 'refuse') throw new SchemaBehindError(from, LATEST_POSTGRES_VERSION, missing);
    if (missing.length > 0) {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`);
      // Per transaction, as the lock's tries set theirs: a transaction pooler may hand the session on.
      await client.query(`SET LOCAL statement_timeout = ${Math.trunc(migrations.statementTimeoutMs)}`);
    }
    for (const m of POSTGRES_MIGRATIONS) {
      if (recorded.has(m.version)) continue;
      try {
        // node-postgres reads a query's own query_timeout over the pool's; its types do not list it.
        await client.query({ text: m.sql, query_timeout: NO_CLIENT_BOUND_MS } as pg.QueryConfig);
      } catch (err) {
        const reason = endedByStatementTimeout(err)
          ? `a statement ran (or waited for a lock) past ${STATEMENT_TIMEOUT_SETTING}=${migrations.statementTimeoutMs}, ` +
            'the bound on each migration statement: raise it (0: no bound), or end what holds its table'
          : (err as Error).message;
        throw migrationFailed(m.version, m.name, from, reason, err);
      }
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
    }
    await client.query('COMMIT');
    const outcome = { from, to: Math.max(from, ...missing), latest: LATEST_POSTGRES_VERSION, applied: missing };
    migrations.onOutcome?.(outcome);
    return outcome;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

export const LATEST_POSTGRES_VERSION = POSTGRES_MIGRATIONS[POSTGRES_MIGRATIONS.length - 1]!.version;
