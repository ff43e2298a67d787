/** API keys on PostgreSQL; the lookup by hash, on every request whose key is not cached, is a named statement. */
import type { ApiKey, Environment } from '../../domain/api-key.ts';
import { toApiKey, type ApiKeyRow } from '../rows.ts';
import type { KeyChanges, KeyStore, NewApiKey } from '../store.ts';
import type { Query } from './query.ts';

export function postgresKeys(query: Query): KeyStore {
  return {
    async createKey(key: NewApiKey): Promise<ApiKey> {
      const [row] = await query<ApiKeyRow>(
        `INSERT INTO api_keys (id, hash, prefix, environment, plan, per_minute, per_day, label, created_at, subject_id, tagged)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING *`,
        [
          key.id,
          key.hash,
          key.prefix,
          key.environment,
          key.plan,
          key.perMinute,
          key.perDay,
          key.label,
          Date.now(),
          key.subjectId,
          key.tagged,
        ],
      );
      return toApiKey(row!);
    },

    async untaggedKeyHashes(environment: Environment): Promise<string[]> {
      const rows = await query<{ hash: string }>('SELECT hash FROM api_keys WHERE NOT tagged AND environment = $1 AND revoked_at IS NULL', [
        environment,
      ]);
      return rows.map((r) => r.hash);
    },

    async hasUsableKey(environment: Environment, nowMs: number): Promise<boolean> {
      const rows = await query(
        'SELECT 1 FROM api_keys WHERE environment = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2) LIMIT 1',
        [environment, nowMs],
      );
      return rows.length > 0;
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
        [
          id,
          changes.plan ?? null,
          changes.perMinute ?? null,
          changes.perDay ?? null,
          changes.expiresAtMs !== undefined,
          changes.expiresAtMs ?? null,
        ],
      );
      return row && toApiKey(row);
    },

    async revokeKey(id: string): Promise<boolean> {
      const rows = await query('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING id', [Date.now(), id]);
      return rows.length > 0;
    },
  };
}
