/**
 * The embedded engine: SQLite in-process through Node.js's node:sqlite (driver.ts), in WAL mode.
 *
 * Durability: every write is committed before its promise resolves (creates that arrive in the same
 * turn of the event loop share one transaction; see group-commit.ts). In WAL mode
 * with synchronous=NORMAL a commit reaches the operating system before we answer, so it survives a
 * kill -9 of the server; a power loss or OS crash can lose the last commits. synchronous=FULL
 * (SQLITE_SYNCHRONOUS=full) fsyncs the WAL on every commit and loses nothing acknowledged.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ApiKey } from '../../domain/api-key.ts';
import type { NewPet, Pet } from '../../domain/pet.ts';
import { toApiKey, toPet, type ApiKeyRow, type PetRow } from '../rows.ts';
import { claimOf, type IdempotencyRow } from '../idempotency.ts';
import type { Ban, IdempotencyClaim, IdempotencyScope, KeyChanges, ListPetsQuery, NewApiKey, Store, StoredResponse } from '../store.ts';
import { DatabaseSync, inWriteTransaction, isBusy, type Database, type Statement } from './driver.ts';
import { GroupCommit } from './group-commit.ts';
import { migrate } from './migrations.ts';

export interface SqliteOptions {
  path: string;
  synchronous: 'normal' | 'full';
}

/**
 * Turning a new file to WAL needs an exclusive lock, which SQLite refuses at once (without the busy
 * handler) when another process is taking its first look at the same new file, as a server and the
 * CLI started together do. The switch is retried for up to busy_timeout's 5 seconds.
 */
function switchToWal(db: Database): void {
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      db.exec('PRAGMA journal_mode = WAL');
      return;
    } catch (err) {
      if (!isBusy(err) || Date.now() > deadline) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20); // at start-up only: a short blocking pause
    }
  }
}

export function openSqliteStore(options: SqliteOptions): Store {
  if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
  const db = new DatabaseSync(options.path);
  // Another process (the CLI, a second server) may hold the write lock briefly.
  db.exec('PRAGMA busy_timeout = 5000');
  switchToWal(db);
  db.exec(`PRAGMA synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  db.exec('PRAGMA foreign_keys = ON');
  migrate(db);

  // Pet columns come back as bigint, so no int64 above 2^53 loses precision. Elsewhere values are
  // small, and node:sqlite throws rather than round one that is not.
  const exact = (statement: Statement): Statement => {
    statement.setReadBigInts(true);
    return statement;
  };
  const insertPet = exact(db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id, name, category_id, status'));
  const selectPet = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE id = ?'));
  const listAll = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE id > ? ORDER BY id LIMIT ?'));
  const listByStatus = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?'));

  const insertKey = db.prepare(`INSERT INTO api_keys
    (id, hash, prefix, environment, plan, per_minute, per_day, label, created_at)
    VALUES (@id, @hash, @prefix, @environment, @plan, @perMinute, @perDay, @label, @createdAt)
    RETURNING *`);
  const selectKeyByHash = db.prepare('SELECT * FROM api_keys WHERE hash = ?');
  const selectKeys = db.prepare('SELECT * FROM api_keys ORDER BY created_at, id');
  const selectKeyById = db.prepare('SELECT * FROM api_keys WHERE id = ?');
  const updateKeyRow = db.prepare(`UPDATE api_keys SET plan = @plan, per_minute = @perMinute, per_day = @perDay,
    expires_at = @expiresAt WHERE id = @id RETURNING *`);
  const revoke = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
  const upsertBan = db.prepare(`INSERT INTO bans (key_id, banned_until, created_at) VALUES (?, ?, ?)
    ON CONFLICT (key_id) DO UPDATE SET banned_until = excluded.banned_until, created_at = excluded.created_at`);
  const selectBanEnd = db.prepare('SELECT banned_until FROM bans WHERE key_id = ? AND banned_until > ?');
  const selectBans = db.prepare('SELECT key_id, banned_until FROM bans WHERE banned_until > ? ORDER BY key_id');
  const deleteBan = db.prepare('DELETE FROM bans WHERE key_id = ? RETURNING banned_until');
  const selectSetting = db.prepare('SELECT value FROM settings WHERE name = ?');

  const insertOne = (pet: NewPet): Pet => toPet(insertPet.get(pet.name, pet.categoryId, pet.status) as unknown as PetRow);
  const commits = new GroupCommit(db, insertOne);
  let open = true;

  const deleteExpiredClaim = db.prepare('DELETE FROM idempotency_keys WHERE key_id = ? AND idempotency_key = ? AND created_at <= ?');
  const insertClaim = db.prepare(`INSERT INTO idempotency_keys (key_id, idempotency_key, request_hash, created_at)
    VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`);
  const selectClaim = db.prepare('SELECT * FROM idempotency_keys WHERE key_id = ? AND idempotency_key = ?');
  const takeOverClaim = db.prepare('UPDATE idempotency_keys SET request_hash = ?, created_at = ? WHERE key_id = ? AND idempotency_key = ?');
  const finishClaim = db.prepare('UPDATE idempotency_keys SET status = ?, body = ?, location = ? WHERE key_id = ? AND idempotency_key = ?');
  const deleteClaim = db.prepare('DELETE FROM idempotency_keys WHERE key_id = ? AND idempotency_key = ? AND status IS NULL');
  const deleteExpiredClaims = db.prepare('DELETE FROM idempotency_keys WHERE created_at <= ?');
  // Under the write lock (BEGIN IMMEDIATE): two processes cannot both claim a key.
  const claim = (
    { keyId, idempotencyKey }: IdempotencyScope,
    requestHash: string,
    nowMs: number,
    expiresAfterMs: number,
    staleAfterMs: number,
  ): IdempotencyClaim =>
    inWriteTransaction(db, () => {
      deleteExpiredClaim.run(keyId, idempotencyKey, nowMs - expiresAfterMs);
      if (Number(insertClaim.run(keyId, idempotencyKey, requestHash, nowMs).changes) === 1) return { state: 'claimed' };
      const found = claimOf(selectClaim.get(keyId, idempotencyKey) as unknown as IdempotencyRow, requestHash, nowMs, staleAfterMs);
      if (found !== 'take-over') return found;
      takeOverClaim.run(requestHash, nowMs, keyId, idempotencyKey);
      return { state: 'claimed' };
    });
  const createAndRecord = ({ keyId, idempotencyKey }: IdempotencyScope, pet: NewPet, render: (pet: Pet) => StoredResponse) =>
    inWriteTransaction(db, () => {
      const response = render(insertOne(pet));
      finishClaim.run(response.status, response.body, response.location, keyId, idempotencyKey);
      return response;
    });

  return {
    engine: 'sqlite',
    fullPagesAreFinal: true,

    createPet: (pet: NewPet): Promise<Pet> => commits.add(pet),

    async getPet(id: bigint): Promise<Pet | undefined> {
      const row = selectPet.get(id) as unknown as PetRow | undefined;
      return row && toPet(row);
    },

    async listPets({ status, afterId, limit }: ListPetsQuery): Promise<Pet[]> {
      const after = afterId ?? 0n;
      const rows = (status ? listByStatus.all(status, after, limit) : listAll.all(after, limit)) as unknown as PetRow[];
      return rows.map(toPet);
    },

    async claimIdempotencyKey(scope, requestHash, nowMs, expiresAfterMs, staleAfterMs) {
      return claim(scope, requestHash, nowMs, expiresAfterMs, staleAfterMs);
    },

    async createPetIdempotently(scope, pet, render) {
      return createAndRecord(scope, pet, render);
    },

    async releaseIdempotencyKey({ keyId, idempotencyKey }) {
      deleteClaim.run(keyId, idempotencyKey);
    },

    async purgeIdempotencyKeys(beforeMs) {
      return Number(deleteExpiredClaims.run(beforeMs).changes);
    },

    async createKey(key: NewApiKey): Promise<ApiKey> {
      return toApiKey(insertKey.get({ ...key, createdAt: Date.now() }) as unknown as ApiKeyRow);
    },

    async findKeyByHash(hash: string): Promise<ApiKey | undefined> {
      const row = selectKeyByHash.get(hash) as unknown as ApiKeyRow | undefined;
      return row && toApiKey(row);
    },

    async listKeys(): Promise<ApiKey[]> {
      return (selectKeys.all() as unknown as ApiKeyRow[]).map(toApiKey);
    },

    async updateKey(id: string, changes: KeyChanges): Promise<ApiKey | undefined> {
      const current = selectKeyById.get(id) as unknown as ApiKeyRow | undefined;
      if (!current) return undefined;
      const row = updateKeyRow.get({
        id,
        plan: changes.plan ?? current.plan,
        perMinute: changes.perMinute ?? current.per_minute,
        perDay: changes.perDay ?? current.per_day,
        expiresAt: changes.expiresAtMs === undefined ? current.expires_at : changes.expiresAtMs,
      }) as unknown as ApiKeyRow;
      return toApiKey(row);
    },

    async revokeKey(id: string): Promise<boolean> {
      return Number(revoke.run(Date.now(), id).changes) > 0;
    },

    async banKey(keyId: string, untilMs: number): Promise<void> {
      upsertBan.run(keyId, untilMs, Date.now());
    },

    async banEndOf(keyId: string, nowMs: number): Promise<number | undefined> {
      return (selectBanEnd.get(keyId, nowMs) as { banned_until: number } | undefined)?.banned_until;
    },

    async listBans(nowMs: number): Promise<Ban[]> {
      return (selectBans.all(nowMs) as { key_id: string; banned_until: number }[]).map((r) => ({
        keyId: r.key_id,
        bannedUntil: new Date(r.banned_until),
      }));
    },

    async liftBan(keyId: string, nowMs: number): Promise<boolean> {
      const until = (deleteBan.get(keyId) as { banned_until: number } | undefined)?.banned_until;
      return until !== undefined && until > nowMs;
    },

    async cursorSecret(): Promise<string> {
      return (selectSetting.get('cursor_secret') as { value: string }).value;
    },

    async ping(): Promise<void> {
      db.prepare('SELECT 1').get();
    },

    async close(): Promise<void> {
      if (!open) return;
      open = false;
      commits.close();
      db.close();
    },
  };
}
