/**
 * Idempotency claims on PostgreSQL. A claim is an INSERT that only one of several instances can win
 * (the primary key decides); a finished claim holds its pet's id and is read with the pet joined in.
 */
import { claimOf, type ClaimRow } from '../claims.ts';
import { toPet, type PetRow } from '../rows.ts';
import type { IdempotencyStore } from '../store.ts';
import { PET_COLUMNS } from './pets.ts';
import type { Query } from './query.ts';

export function postgresIdempotency(query: Query): IdempotencyStore {
  return {
    async claimIdempotencyKey({ keyId, idempotencyKey }, requestHash, nowMs, expiresAfterMs, staleAfterMs) {
      await query('DELETE FROM idempotency_keys WHERE key_id = $1 AND idempotency_key = $2 AND created_at <= $3', [
        keyId,
        idempotencyKey,
        nowMs - expiresAfterMs,
      ]);
      const inserted = await query(
        `INSERT INTO idempotency_keys (key_id, idempotency_key, request_hash, created_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING RETURNING key_id`,
        [keyId, idempotencyKey, requestHash, nowMs],
      );
      if (inserted.length === 1) return { state: 'claimed' };
      const [row] = await query<ClaimRow>(
        `SELECT k.request_hash, k.created_at, k.pet_id, p.name, p.category_id, p.status
         FROM idempotency_keys k LEFT JOIN pets p ON p.id = k.pet_id
         WHERE k.key_id = $1 AND k.idempotency_key = $2`,
        [keyId, idempotencyKey],
      );
      if (!row) return { state: 'in_flight' }; // released or expired this very moment: the client retries
      const found = claimOf(row, requestHash, nowMs, staleAfterMs);
      if (found !== 'take-over') return found;
      // Only one of several takers matches the old created_at: the others find the row changed.
      const taken = await query(
        `UPDATE idempotency_keys SET request_hash = $3, created_at = $4
         WHERE key_id = $1 AND idempotency_key = $2 AND pet_id IS NULL AND created_at = $5 RETURNING key_id`,
        [keyId, idempotencyKey, requestHash, nowMs, String(row.created_at)],
      );
      return taken.length === 1 ? { state: 'claimed' } : { state: 'in_flight' };
    },

    /*
     * The pet and its id on the claim commit together: one statement, so one transaction and one round
     * trip. If the connection fails so that the outcome is unknown, the create is not undone as plain
     * creates are: the client was given an Idempotency-Key to retry with, and the retry either finds
     * the pet or creates.
     */
    async createPetIdempotently({ keyId, idempotencyKey }, pet) {
      const [row] = await query<PetRow>(
        `WITH pet AS (
           INSERT INTO pets (name, category_id, status) VALUES ($3, $4, $5) RETURNING ${PET_COLUMNS}
         ), claim AS (
           UPDATE idempotency_keys SET pet_id = (SELECT id FROM pet) WHERE key_id = $1 AND idempotency_key = $2
         )
         SELECT ${PET_COLUMNS} FROM pet`,
        [keyId, idempotencyKey, pet.name, pet.categoryId.toString(), pet.status],
        'create-pet-idempotently',
      );
      return toPet(row!);
    },

    async releaseIdempotencyKey({ keyId, idempotencyKey }) {
      await query('DELETE FROM idempotency_keys WHERE key_id = $1 AND idempotency_key = $2 AND pet_id IS NULL', [keyId, idempotencyKey]);
    },

    async purgeIdempotencyKeys(beforeMs) {
      return (await query('DELETE FROM idempotency_keys WHERE created_at <= $1 RETURNING 1', [beforeMs])).length;
    },
  };
}
