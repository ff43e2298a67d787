/**
 * The embedded engine: SQLite in-process through better-sqlite3, in WAL mode.
 *
 * Durability: every write is its own committed transaction before the promise resolves. In WAL mode
 * with synchronous=NORMAL a commit reaches the operating system before we answer, so it survives a
 * kill -9 of the server; a power loss or OS crash can lose the last commits. synchronous=FULL
 * (SQLITE_SYNCHRONOUS=full) fsyncs the WAL on every commit and loses nothing acknowledged.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { ApiKey } from '../../domain/api-key.js';
import type { NewPet, Pet } from '../../domain/pet.js';
import { toApiKey, toPet, type ApiKeyRow, type PetRow } from '../rows.js';
import type { Ban, ListPetsQuery, NewApiKey, Store } from '../store.js';
import { migrate } from './migrations.js';

export interface SqliteOptions {
  path: string;
  synchronous: 'normal' | 'full';
}

export function openSqliteStore(options: SqliteOptions): Store {
  if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
  const db = new BetterSqlite3(options.path);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  // Another process (the CLI, a second server) may hold the write lock briefly.
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  migrate(db);

  // safeIntegers: int64 columns come back as bigint, so no value above 2^53 loses precision.
  const insertPet = db
    .prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id, name, category_id, status')
    .safeIntegers(true);
  const selectPet = db.prepare('SELECT id, name, category_id, status FROM pets WHERE id = ?').safeIntegers(true);
  const listAll = db
    .prepare('SELECT id, name, category_id, status FROM pets WHERE id > ? ORDER BY id LIMIT ?')
    .safeIntegers(true);
  const listByStatus = db
    .prepare('SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?')
    .safeIntegers(true);

  const insertKey = db.prepare(`INSERT INTO api_keys
    (id, hash, prefix, environment, plan, per_minute, per_day, label, created_at)
    VALUES (@id, @hash, @prefix, @environment, @plan, @perMinute, @perDay, @label, @createdAt)
    RETURNING *`);
  const selectKeyByHash = db.prepare('SELECT * FROM api_keys WHERE hash = ?');
  const selectKeys = db.prepare('SELECT * FROM api_keys ORDER BY created_at, id');
  const revoke = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
  const upsertBan = db.prepare(`INSERT INTO bans (key_id, banned_until, created_at) VALUES (?, ?, ?)
    ON CONFLICT (key_id) DO UPDATE SET banned_until = excluded.banned_until, created_at = excluded.created_at`);
  const selectBanEnd = db.prepare('SELECT banned_until FROM bans WHERE key_id = ? AND banned_until > ?').pluck();
  const selectBans = db.prepare('SELECT key_id, banned_until FROM bans WHERE banned_until > ? ORDER BY key_id');
  const deleteBan = db.prepare('DELETE FROM bans WHERE key_id = ? RETURNING banned_until').pluck();
  const selectSetting = db.prepare('SELECT value FROM settings WHERE name = ?').pluck();

  return {
    engine: 'sqlite',
    fullPagesAreFinal: true,

    async createPet(pet: NewPet): Promise<Pet> {
      return toPet(insertPet.get(pet.name, pet.categoryId, pet.status) as PetRow);
    },

    async getPet(id: bigint): Promise<Pet | undefined> {
      const row = selectPet.get(id) as PetRow | undefined;
      return row && toPet(row);
    },

    async listPets({ status, afterId, limit }: ListPetsQuery): Promise<Pet[]> {
      const after = afterId ?? 0n;
      const rows = (status ? listByStatus.all(status, after, limit) : listAll.all(after, limit)) as PetRow[];
      return rows.map(toPet);
    },

    async createKey(key: NewApiKey): Promise<ApiKey> {
      return toApiKey(insertKey.get({ ...key, createdAt: Date.now() }) as ApiKeyRow);
    },

    async findKeyByHash(hash: string): Promise<ApiKey | undefined> {
      const row = selectKeyByHash.get(hash) as ApiKeyRow | undefined;
      return row && toApiKey(row);
    },

    async listKeys(): Promise<ApiKey[]> {
      return (selectKeys.all() as ApiKeyRow[]).map(toApiKey);
    },

    async revokeKey(id: string): Promise<boolean> {
      return revoke.run(Date.now(), id).changes > 0;
    },

    async banKey(keyId: string, untilMs: number): Promise<void> {
      upsertBan.run(keyId, untilMs, Date.now());
    },

    async banEndOf(keyId: string, nowMs: number): Promise<number | undefined> {
      return selectBanEnd.get(keyId, nowMs) as number | undefined;
    },

    async listBans(nowMs: number): Promise<Ban[]> {
      return (selectBans.all(nowMs) as { key_id: string; banned_until: number }[]).map((r) => ({
        keyId: r.key_id,
        bannedUntil: new Date(r.banned_until),
      }));
    },

    async liftBan(keyId: string, nowMs: number): Promise<boolean> {
      const until = deleteBan.get(keyId) as number | undefined;
      return until !== undefined && until > nowMs;
    },

    async cursorSecret(): Promise<string> {
      return selectSetting.get('cursor_secret') as string;
    },

    async ping(): Promise<void> {
      db.prepare('SELECT 1').get();
    },

    async close(): Promise<void> {
      db.close();
    },
  };
}
