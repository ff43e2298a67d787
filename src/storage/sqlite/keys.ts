/** API keys on SQLite, each statement prepared once. */
import type { ApiKey, Environment } from '../../domain/api-key.ts';
import { toApiKey, type ApiKeyRow } from '../rows.ts';
import type { KeyChanges, KeyStore, NewApiKey } from '../store.ts';
import { exact, type Database } from './driver.ts';
import type { SqliteWriter } from './writer.ts';

export function sqliteKeys(db: Database, writer: SqliteWriter): KeyStore {
  const insertKey = db.prepare(`INSERT INTO api_keys
    (id, hash, prefix, environment, plan, per_minute, per_day, label, created_at, subject_id, tagged)
    VALUES (@id, @hash, @prefix, @environment, @plan, @perMinute, @perDay, @label, @createdAt, @subjectId, @tagged)
    RETURNING *`);
  const selectKeyByHash = db.prepare('SELECT * FROM api_keys WHERE hash = ?');
  const selectUntagged = db.prepare('SELECT hash FROM api_keys WHERE tagged = 0 AND environment = ? AND revoked_at IS NULL');
  const selectUsable = db.prepare(
    'SELECT 1 FROM api_keys WHERE environment = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) LIMIT 1',
  );
  const selectKeys = db.prepare('SELECT * FROM api_keys ORDER BY created_at, id');
  const selectKeyById = db.prepare('SELECT * FROM api_keys WHERE id = ?');
  const updateKeyRow = db.prepare(`UPDATE api_keys SET plan = @plan, per_minute = @perMinute, per_day = @perDay,
    expires_at = @expiresAt WHERE id = @id RETURNING *`);
  const revoke = exact(db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'));
  return {
    async createKey(key: NewApiKey): Promise<ApiKey> {
      const row = await writer.write(() => insertKey.get({ ...key, tagged: key.tagged ? 1 : 0, createdAt: Date.now() }));
      return toApiKey(row as unknown as ApiKeyRow);
    },

    async untaggedKeyHashes(environment: Environment): Promise<string[]> {
      return (selectUntagged.all(environment) as { hash: string }[]).map((r) => r.hash);
    },

    async hasUsableKey(environment: Environment, nowMs: number): Promise<boolean> {
      return selectUsable.get(environment, nowMs) !== undefined;
    },

    async findKeyByHash(hash: string): Promise<ApiKey | undefined> {
      const row = selectKeyByHash.get(hash) as unknown as ApiKeyRow | undefined;
      return row && toApiKey(row);
    },

    async listKeys(): Promise<ApiKey[]> {
      return (selectKeys.all() as unknown as ApiKeyRow[]).map(toApiKey);
    },

    async updateKey(id: string, changes: KeyChanges): Promise<ApiKey | undefined> {
      // Read and written in one transaction, so no other process changes the key in between.
      const row = await writer.write(() => {
        const current = selectKeyById.get(id) as unknown as ApiKeyRow | undefined;
        if (!current) return undefined;
        return updateKeyRow.get({
          id,
          plan: changes.plan ?? current.plan,
          perMinute: changes.perMinute ?? current.per_minute,
          perDay: changes.perDay ?? current.per_day,
          expiresAt: changes.expiresAtMs === undefined ? current.expires_at : changes.expiresAtMs,
        }) as unknown as ApiKeyRow;
      });
      return row && toApiKey(row);
    },

    async revokeKey(id: string): Promise<boolean> {
      return Number((await writer.write(() => revoke.run(Date.now(), id))).changes) > 0;
    },
  };
}
