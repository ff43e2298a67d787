/**
 * Idempotency claims on SQLite, each statement prepared once. A finished claim holds its pet's id and
 * is read with the pet joined in.
 */
import { claimOf, type ClaimRow } from '../claims.ts';
import type { IdempotencyClaim, IdempotencyStore } from '../store.ts';
import { exact, inWriteTransaction, type Database } from './driver.ts';
import type { InsertPet } from './pets.ts';

export function sqliteIdempotency(db: Database, insertPet: InsertPet): IdempotencyStore {
  const deleteExpiredClaim = exact(db.prepare('DELETE FROM idempotency_keys WHERE key_id = ? AND idempotency_key = ? AND created_at <= ?'));
  const insertClaim = exact(
    db.prepare(`INSERT INTO idempotency_keys (key_id, idempotency_key, request_hash, created_at)
      VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`),
  );
  const selectClaim = exact(
    db.prepare(`SELECT k.request_hash, k.created_at, k.pet_id, p.name, p.category_id, p.status
      FROM idempotency_keys k LEFT JOIN pets p ON p.id = k.pet_id
      WHERE k.key_id = ? AND k.idempotency_key = ?`),
  );
  const takeOverClaim = exact(
    db.prepare('UPDATE idempotency_keys SET request_hash = ?, created_at = ? WHERE key_id = ? AND idempotency_key = ?'),
  );
  const finishClaim = exact(db.prepare('UPDATE idempotency_keys SET pet_id = ? WHERE key_id = ? AND idempotency_key = ?'));
  const deleteClaim = exact(db.prepare('DELETE FROM idempotency_keys WHERE key_id = ? AND idempotency_key = ? AND pet_id IS NULL'));
  const deleteExpiredClaims = exact(db.prepare('DELETE FROM idempotency_keys WHERE created_at <= ?'));

  return {
    async claimIdempotencyKey({ keyId, idempotencyKey }, requestHash, nowMs, expiresAfterMs, staleAfterMs) {
      // Under the write lock (BEGIN IMMEDIATE): two processes cannot both claim a key.
      return inWriteTransaction(db, (): IdempotencyClaim => {
        deleteExpiredClaim.run(keyId, idempotencyKey, nowMs - expiresAfterMs);
        if (Number(insertClaim.run(keyId, idempotencyKey, requestHash, nowMs).changes) === 1) return { state: 'claimed' };
        const found = claimOf(selectClaim.get(keyId, idempotencyKey) as unknown as ClaimRow, requestHash, nowMs, staleAfterMs);
        if (found !== 'take-over') return found;
        takeOverClaim.run(requestHash, nowMs, keyId, idempotencyKey);
        return { state: 'claimed' };
      });
    },

    async createPetIdempotently({ keyId, idempotencyKey }, pet) {
      return inWriteTransaction(db, () => {
        const created = insertPet(pet);
        finishClaim.run(created.id, keyId, idempotencyKey);
        return created;
      });
    },

    async releaseIdempotencyKey({ keyId, idempotencyKey }) {
      deleteClaim.run(keyId, idempotencyKey);
    },

    async purgeIdempotencyKeys(beforeMs) {
      return Number(deleteExpiredClaims.run(beforeMs).changes);
    },
  };
}
