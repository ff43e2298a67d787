/**
 * The scale-out engine: PostgreSQL through a pg connection pool. Every instance of the service shares
 * it. int8 columns arrive as strings (pg's default) and become bigint in the row mapper, so nothing
 * above 2^53 loses precision. Connection attempts and statements have short timeouts so that an
 * unreachable database becomes a quick 503, never a hanging request.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { ApiKey } from '../../domain/api-key.js';
import type { NewPet, Pet } from '../../domain/pet.js';
import { StorageUnavailableError } from '../errors.js';
import { toApiKey, toPet, type ApiKeyRow, type PetRow } from '../rows.js';
import type { Ban, ListPetsQuery, NewApiKey, Store } from '../store.js';
import { migrate } from './migrations.js';

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

  async function query<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    try {
      return (await pool.query<R>({ text, values })).rows;
    } catch (err) {
      throw isUnavailable(err) ? new StorageUnavailableError(err) : err;
    }
  }

  const PET_COLUMNS = 'id, name, category_id, status';

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
      const [row] = await query<PetRow>(`SELECT ${PET_COLUMNS} FROM pets WHERE id = $1`, [id.toString()]);
      return row && toPet(row);
    },

    async listPets({ status, afterId, limit }: ListPetsQuery): Promise<Pet[]> {
      const after = (afterId ?? 0n).toString();
      const rows = status
        ? await query<PetRow>(`SELECT ${PET_COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`, [status, after, limit])
        : await query<PetRow>(`SELECT ${PET_COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`, [after, limit]);
      return rows.map(toPet);
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
      const [row] = await query<ApiKeyRow>('SELECT * FROM api_keys WHERE hash = $1', [hash]);
      return row && toApiKey(row);
    },

    async listKeys(): Promise<ApiKey[]> {
      return (await query<ApiKeyRow>('SELECT * FROM api_keys ORDER BY created_at, id')).map(toApiKey);
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
      const [row] = await query<{ banned_until: string }>('SELECT banned_until FROM bans WHERE key_id = $1 AND banned_until > $2', [keyId, nowMs]);
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
