/**
 * Idempotency claims on SQLite, each statement prepared once. A finished claim holds its pet's id and
 * is read with the pet joined in; an unfinished one holds the fencing token of the request that owns it.
 */
import { claimOf, foundClaimOf, newClaimToken, type ClaimRow } from '../claims.ts';
import type { IdempotencyClaim, IdempotencyStore } from '../store.ts';
import { exact, type Database } from './driver.ts';
import type { InsertPet } from './pets.ts';
import type { SqliteWriter } from './writer.ts';

export function sqliteIdempotency(db: Database, writer: SqliteWriter, insertPet: InsertPet): IdempotencyStore {
  const deleteExpiredClaim = exact(db.prepare('DELETE FROM idempotency_keys WHERE key_id = ? AND idempotency_key = ? AND created_at <= ?'));
  const insertClaim = exact(
    db.prepare(`INSERT INTO idempotency_keys (key_id, idempotency_key, request_hash, created_at, claim_token)
      VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
  );
  const selectClaim = exact(
    db.prepare(`SELECT k.request_hash, k.created_at, k.pet_id, p.name, p.category_id, p.status
      FROM idempotency_keys k LEFT JOIN pets p ON p.id = k.pet_id
      WHERE k.key_id = ? AND k.idempotency_key = ?`),
  );
  const takeOverClaim = exact(
    db.prepare('UPDATE idempotency_keys SET request_hash = ?, created_at = ?, claim_token = ? WHERE key_id = ? AND idempotency_key = ?'),
  );
  const fencedClaim = 'key_id = ? AND idempotency_key = ? AND claim_token = ? AND pet_id IS NULL';
  const selectHeld = exact(db.prepare(`SELECT 1 AS held FROM idempotency_keys WHERE ${fencedClaim}`));
  // A finished claim is fenced by its pet_id, so its token goes.
  const finishClaim = exact(db.prepare(`UPDATE idempotency_keys SET pet_id = ?, claim_token = NULL WHERE ${fencedClaim}`));
  const deleteClaim = exact(db.prepare(`DELETE FROM idempotency_keys WHERE ${fencedClaim}`));
  const deleteExpiredClaims = exact(db.prepare('DELETE FROM idempotency_keys WHERE created_at <= ?'));

  return {
    async claimIdempotencyKey({ keyId, idempotencyKey }, requestHash, nowMs, expiredAtMs, staleAfterMs) {
      // Under the write lock (BEGIN IMMEDIATE): two processes cannot both claim a key.
      return writer.write((): IdempotencyClaim => {
        deleteExpiredClaim.run(keyId, idempotencyKey, expiredAtMs);
        const token = newClaimToken();
        if (Number(insertClaim.run(keyId, idempotencyKey, requestHash, nowMs, token).changes) === 1) return { state: 'claimed', token };
        const found = claimOf(selectClaim.get(keyId, idempotencyKey) as unknown as ClaimRow, requestHash, nowMs, staleAfterMs);
        if (found !== 'take-over') return found;
        takeOverClaim.run(requestHash, nowMs, token, keyId, idempotencyKey);
        return { state: 'claimed', token };
      });
    },

    async findIdempotencyKey({ keyId, idempotencyKey }, requestHash, staleAfterMs) {
      const row = selectClaim.get(keyId, idempotencyKey) as unknown as ClaimRow | undefined;
      return row && foundClaimOf(row, requestHash, staleAfterMs);
    },

    /*
     * The fence is checked and the pet made in one write transaction: no other process can take the
     * claim over in between. Any failure rolls the whole transaction back, so nothing of it stays.
     */
    async createPetIdempotently({ keyId, idempotencyKey }, token, pet) {
      return writer.write(() => {
        if (selectHeld.get(keyId, idempotencyKey, token) === undefined) return undefined;
        const created = insertPet(pet);
        finishClaim.run(created.id, keyId, idempotencyKey, token);
        return created;
      });
    },

    async releaseIdempotencyKey({ keyId, idempotencyKey }, token) {
      await writer.write(() => deleteClaim.run(keyId, idempotencyKey, token));
    },

    async purgeIdempotencyKeys(beforeMs) {
      return writer.write(() => Number(deleteExpiredClaims.run(beforeMs).changes));
    },
  };
}
