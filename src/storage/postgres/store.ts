/**
 * The scale-out engine: PostgreSQL through a pg connection pool. Every instance of the service shares
 * it. int8 columns arrive as strings (pg's default) and become bigint in the row mapper, so nothing
 * above 2^53 loses precision. Connection attempts and statements have short timeouts so that an
 * unreachable database becomes a quick 503, never a hanging request.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { ApiKey } from '../../domain/api-key.ts';
import type { NewPet, Pet } from '../../domain/pet.ts';
import { StorageUnavailableError } from '../errors.ts';
import { toApiKey, toPet, type ApiKeyRow, type PetRow } from '../rows.ts';
import { claimOf, type IdempotencyRow } from '../idempotency.ts';
import type { Ban, KeyChanges, ListPetsQuery, PetPageJson, NewApiKey, Store } from '../store.ts';
import { migrate } from './migrations.ts';

export interface PostgresOptions {
  url: string;
  /** Connections per instance. */
  poolSize?: number;
  /** Upper bound for connecting and for each statement. */
  timeoutMs?: number;
}

/** SQLSTATE classes and client errors that mean "the database is not reachable now", not "bad query". */
function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (typeof e.code === 'string' && /^(08|53|57P)/.test(e.code)) return true; // connection, resources, shutdown
  if (e.code === 'ECONNREFUSED' || e.code === 'ECONNRESET' || e.code === 'ETIMEDOUT' || e.code === 'EPIPE') return true;
  return /timeout|terminated|Connection|ECONN/i.test(e.message ?? '');
}

export async function openPostgresStore(options: PostgresOptions): Promise<Store> {
  // Waiting for a pooled connection and running the statement are each bounded: 503 within ~4 s.
  const timeoutMs = options.timeoutMs ?? 2000;
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
    statement_timeout: timeoutMs,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  await migrate(pool);

  /** `name` makes a prepared statement (parsed and planned once per connection): for the hot path. */
  async function query<R extends pg.QueryResultRow>(text: string, values: unknown[] = [], name?: string): Promise<R[]> {
    try {
      return (await pool.query<R>({ text, values, name })).rows;
    } catch (err) {
      throw isUnavailable(err) ? new StorageUnavailableError(err) : err;
    }
  }

  const PET_COLUMNS = 'id, name, category_id, status';

  /*
   * One row per page: the page as compact JSON text (to_json escapes names; ids are exact int8
   * text), the id of its last pet when full, and whether one more pet exists. $1 is the position
   * and $2 the limit; one extra row is read to learn whether a next page exists.
   */
  interface PageRow {
    json: string;
    last_id: string | null;
    n: number;
  }
  const pageSql = (where: string) => `
    WITH page AS (
      SELECT id, name, category_id, status, row_number() OVER (ORDER BY id) AS rn
      FROM (SELECT ${PET_COLUMNS} FROM pets WHERE ${where} ORDER BY id LIMIT $2::int + 1) p
    )
    SELECT '[' || coalesce(string_agg(
             '{"id":' || id || ',"name":' || to_json(name)::text || ',"categoryId":' || category_id
             || ',"status":"' || status || '"}', ',' ORDER BY id) FILTER (WHERE rn <= $2::int), '') || ']' AS json,
           (max(id) FILTER (WHERE rn = $2::int))::text AS last_id,
           count(*)::int AS n
    FROM page`;

  /*
   * A create whose connection fails after the INSERT was sent has an unknown outcome: PostgreSQL may
   * have committed it. The client was told 503, so such a row must not stay. Each INSERT carries a
   * one-time token; tokens of failed creates are deleted as soon as the database answers again.
   */
  const unacknowledged = new Set<string>();
  let undoTimer: NodeJS.Timeout | undefined;
  async function undoUnacknowledged(): Promise<void> {
    const tokens = [...unacknowledged];
    try {
      await pool.query('DELETE FROM pets WHERE create_token = ANY($1)', [tokens]);
      for (const t of tokens) unacknowledged.delete(t);
    } catch {
      // still unreachable: try again on the next tick
    }
    if (unacknowledged.size === 0) {
      clearInterval(undoTimer);
      undoTimer = undefined;
    }
  }

  return {
    engine: 'postgres',
    fullPagesAreFinal: false,

    async createPet(pet: NewPet): Promise<Pet> {
      const token = randomUUID();
      try {
        const [row] = await query<PetRow>(
          `INSERT INTO pets (name, category_id, status, create_token) VALUES ($1, $2, $3, $4) RETURNING ${PET_COLUMNS}`,
          [pet.name, pet.categoryId.toString(), pet.status, token],
          'create-pet',
        );
        return toPet(row!);
      } catch (err) {
        if (err instanceof StorageUnavailableError) {
          unacknowledged.add(token);
          undoTimer ??= setInterval(() => void undoUnacknowledged(), 1000);
        }
        throw err;
      }
    },

    async getPet(id: bigint): Promise<Pet | undefined> {
      const [row] = await query<PetRow>(`SELECT ${PET_COLUMNS} FROM pets WHERE id = $1`, [id.toString()], 'get-pet');
      return row && toPet(row);
    },

    async listPets({ status, afterId, limit }: ListPetsQuery): Promise<Pet[]> {
      const after = (afterId ?? 0n).toString();
      const rows = status
        ? await query<PetRow>(`SELECT ${PET_COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`, [status, after, limit], 'list-by-status')
        : await query<PetRow>(`SELECT ${PET_COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`, [after, limit], 'list-all');
      return rows.map(toPet);
    },

    async listPetsJson({ status, afterId, limit }: ListPetsQuery): Promise<PetPageJson> {
      const after = (afterId ?? 0n).toString();
      const [row] = status
        ? await query<PageRow>(pageSql('status = $3 AND id > $1'), [after, limit, status], 'list-json-by-status')
        : await query<PageRow>(pageSql('id > $1'), [after, limit], 'list-json-all');
      return { json: row!.json, lastId: row!.last_id === null ? undefined : BigInt(row!.last_id), more: row!.n > limit };
    },

    async claimIdempotencyKey({ keyId, idempotencyKey }, requestHash, nowMs, expiresAfterMs, staleAfterMs) {
      await query('DELETE FROM idempotency_keys WHERE key_id = $1 AND idempotency_key = $2 AND created_at <= $3', [keyId, idempotencyKey, nowMs - expiresAfterMs]);
      const inserted = await query(
        `INSERT INTO idempotency_keys (key_id, idempotency_key, request_hash, created_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING RETURNING key_id`,
        [keyId, idempotencyKey, requestHash, nowMs],
      );
      if (inserted.length === 1) return { state: 'claimed' };
      const [row] = await query<IdempotencyRow>('SELECT * FROM idempotency_keys WHERE key_id = $1 AND idempotency_key = $2', [keyId, idempotencyKey]);
      if (!row) return { state: 'in_flight' }; // released or expired this very moment: the client retries
      const found = claimOf(row, requestHash, nowMs, staleAfterMs);
      if (found !== 'take-over') return found;
      // Only one of several takers matches the old created_at: the others find the row changed.
      const taken = await query(
        `UPDATE idempotency_keys SET request_hash = $3, created_at = $4
         WHERE key_id = $1 AND idempotency_key = $2 AND status IS NULL AND created_at = $5 RETURNING key_id`,
        [keyId, idempotencyKey, requestHash, nowMs, String(row.created_at)],
      );
      return taken.length === 1 ? { state: 'claimed' } : { state: 'in_flight' };
    },

    /*
     * The pet and its stored response commit together. If the connection fails so that the outcome is
     * unknown, the create is not undone as plain creates are: the client was given an Idempotency-Key
     * to retry with, and the retry either replays the stored response or creates.
     */
    async createPetIdempotently({ keyId, idempotencyKey }, pet, render) {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw isUnavailable(err) ? new StorageUnavailableError(err) : err;
      }
      try {
        await client.query('BEGIN');
        const { rows } = await client.query<PetRow>(
          `INSERT INTO pets (name, category_id, status) VALUES ($1, $2, $3) RETURNING ${PET_COLUMNS}`,
          [pet.name, pet.categoryId.toString(), pet.status],
        );
        const response = render(toPet(rows[0]!));
        await client.query('UPDATE idempotency_keys SET status = $3, body = $4, location = $5 WHERE key_id = $1 AND idempotency_key = $2', [
          keyId, idempotencyKey, response.status, response.body, response.location,
        ]);
        await client.query('COMMIT');
        client.release();
        return response;
      } catch (err) {
        client.release(true); // a connection in an unknown state is not reused
        throw isUnavailable(err) ? new StorageUnavailableError(err) : err;
      }
    },

    async releaseIdempotencyKey({ keyId, idempotencyKey }) {
      await query('DELETE FROM idempotency_keys WHERE key_id = $1 AND idempotency_key = $2 AND status IS NULL', [keyId, idempotencyKey]);
    },

    async purgeIdempotencyKeys(beforeMs) {
      return (await query('DELETE FROM idempotency_keys WHERE created_at <= $1 RETURNING 1', [beforeMs])).length;
    },

    async createKey(key: NewApiKey): Promise<ApiKey> {
      const [row] = await query<ApiKeyRow>(
        `INSERT INTO api_keys (id, hash, prefix, environment, plan, per_minute, per_day, label, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
        [key.id, key.hash, key.prefix, key.environment, key.plan, key.perMinute, key.perDay, key.label, Date.now()],
      );
      return toApiKey(row!);
    },

    async findKeyByHash(hash: string): Promise<ApiKey | undefined> {
      const [row] = await query<ApiKeyRow>('SELECT * FROM api_keys WHERE hash = $1', [hash], 'key-by-hash');
      return row && toApiKey(row);
    },

    async listKeys(): Promise<ApiKey[]> {
      return (await query<ApiKeyRow>('SELECT * FROM api_keys ORDER BY created_at, id')).map(toApiKey);
    },

    async updateKey(id: string, changes: KeyChanges): Promise<ApiKey | undefined> {
      // One statement: each field changes only when given (expiry null means "never", so it is
      // flagged separately from "not given").
      const [row] = await query<ApiKeyRow>(
        `UPDATE api_keys SET plan = coalesce($2, plan), per_minute = coalesce($3, per_minute), per_day = coalesce($4, per_day),
           expires_at = CASE WHEN $5 THEN $6::bigint ELSE expires_at END
         WHERE id = $1 RETURNING *`,
        [id, changes.plan ?? null, changes.perMinute ?? null, changes.perDay ?? null, changes.expiresAtMs !== undefined, changes.expiresAtMs ?? null],
      );
      return row && toApiKey(row);
    },

    async revokeKey(id: string): Promise<boolean> {
      const rows = await query('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING id', [Date.now(), id]);
      return rows.length > 0;
    },

    async banKey(keyId: string, untilMs: number): Promise<void> {
      await query(
        `INSERT INTO bans (key_id, banned_until, created_at) VALUES ($1, $2, $3)
         ON CONFLICT (key_id) DO UPDATE SET banned_until = excluded.banned_until, created_at = excluded.created_at`,
        [keyId, untilMs, Date.now()],
      );
    },

    async banEndOf(keyId: string, nowMs: number): Promise<number | undefined> {
      const [row] = await query<{ banned_until: string }>('SELECT banned_until FROM bans WHERE key_id = $1 AND banned_until > $2', [keyId, nowMs], 'ban-end');
      return row && Number(row.banned_until);
    },

    async listBans(nowMs: number): Promise<Ban[]> {
      const rows = await query<{ key_id: string; banned_until: string }>(
        'SELECT key_id, banned_until FROM bans WHERE banned_until > $1 ORDER BY key_id',
        [nowMs],
      );
      return rows.map((r) => ({ keyId: r.key_id, bannedUntil: new Date(Number(r.banned_until)) }));
    },

    async liftBan(keyId: string, nowMs: number): Promise<boolean> {
      const [row] = await query<{ banned_until: string }>('DELETE FROM bans WHERE key_id = $1 RETURNING banned_until', [keyId]);
      return row !== undefined && Number(row.banned_until) > nowMs;
    },

    async cursorSecret(): Promise<string> {
      const [row] = await query<{ value: string }>("SELECT value FROM settings WHERE name = 'cursor_secret'");
      return row!.value;
    },

    poolStats() {
      return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
    },

    async ping(): Promise<void> {
      await query('SELECT 1');
    },

    async close(): Promise<void> {
      if (unacknowledged.size > 0) await undoUnacknowledged();
      clearInterval(undoTimer);
      await pool.end();
    },
  };
}
