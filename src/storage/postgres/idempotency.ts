/**
 * Idempotency claims on PostgreSQL. A claim is an INSERT that only one of several instances can win
 * (the primary key decides); an unfinished claim holds the fencing token of the request that owns it,
 * and a finished one its pet's id, read with the pet joined in.
 */
import { claimOf, foundClaimOf, newClaimToken, type ClaimRow } from '../claims.ts';
import { toPet, type PetRow } from '../rows.ts';
import type { IdempotencyStore } from '../store.ts';
import { createFailure, PET_COLUMNS } from './pets.ts';
import type { Query } from './query.ts';

const SELECT_CLAIM = `SELECT k.request_hash, k.created_at, k.pet_id, p.name, p.category_id, p.status
  FROM idempotency_keys k LEFT JOIN pets p ON p.id = k.pet_id
  WHERE k.key_id = $1 AND k.idempotency_key = $2`;

/*
 * The fenced create: the claim takes an id only while it has the caller's token and no pet (a finished claim needs
 * no token), and the pet is inserted from that row (foreign key checked at the statement's end). READ COMMITTED
 * re-checks the WHERE on the latest row version, so a create that waited past its caller's timeout inserts nothing.
 */
const CREATE_FENCED = `
  WITH claim AS (
    UPDATE idempotency_keys SET pet_id = nextval(pg_get_serial_sequence('pets', 'id')), claim_token = NULL
    WHERE key_id = $1 AND idempotency_key = $2 AND claim_token = $3 AND pet_id IS NULL
    RETURNING pet_id
  )
  INSERT INTO pets (id, name, category_id, status) OVERRIDING SYSTEM VALUE
  SELECT pet_id, $4, $5, $6 FROM claim
  RETURNING ${PET_COLUMNS}`;

export function postgresIdempotency(query: Query): IdempotencyStore {
  return {
    async claimIdempotencyKey({ keyId, idempotencyKey }, requestHash, nowMs, expiredAtMs, staleAfterMs) {
      await query('DELETE FROM idempotency_keys WHERE key_id = $1 AND idempotency_key = $2 AND created_at <= $3', [
        keyId,
        idempotencyKey,
        expiredAtMs,
      ]);
      const token = newClaimToken();
      const inserted = await query(
        `INSERT INTO idempotency_keys (key_id, idempotency_key, request_hash, created_at, claim_token) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING RETURNING key_id`,
        [keyId, idempotencyKey, requestHash, nowMs, token],
      );
      if (inserted.length === 1) return { state: 'claimed', token };
      const [row] = await query<ClaimRow>(SELECT_CLAIM, [keyId, idempotencyKey]);
      if (!row) return { state: 'in_flight', staleAtMs: nowMs }; // released or expired this very moment: the client retries
      const found = claimOf(row, requestHash, nowMs, staleAfterMs);
      if (found !== 'take-over') return found;
      // Only one of several takers matches the old created_at: the others find the row changed.
      const taken = await query(
        `UPDATE idempotency_keys SET request_hash = $3, created_at = $4, claim_token = $6
         WHERE key_id = $1 AND idempotency_key = $2 AND pet_id IS NULL AND created_at = $5 RETURNING key_id`,
        [keyId, idempotencyKey, requestHash, nowMs, String(row.created_at), token],
      );
      return taken.length === 1 ? { state: 'claimed', token } : { state: 'in_flight', staleAtMs: nowMs + staleAfterMs };
    },

    async findIdempotencyKey({ keyId, idempotencyKey }, requestHash, staleAfterMs) {
      const [row] = await query<ClaimRow>(SELECT_CLAIM, [keyId, idempotencyKey]);
      return row && foundClaimOf(row, requestHash, staleAfterMs);
    },

    async createPetIdempotently({ keyId, idempotencyKey }, token, pet) {
      try {
        const [row] = await query<PetRow>(
          CREATE_FENCED,
          [keyId, idempotencyKey, token, pet.name, pet.categoryId.toString(), pet.status],
          'create-pet-idempotently',
        );
        return row && toPet(row);
      } catch (err) {
        throw createFailure(err);
      }
    },

    async releaseIdempotencyKey({ keyId, idempotencyKey }, token) {
      await query('DELETE FROM idempotency_keys WHERE key_id = $1 AND idempotency_key = $2 AND claim_token = $3 AND pet_id IS NULL', [
        keyId,
        idempotencyKey,
        token,
      ]);
    },

    async purgeIdempotencyKeys(beforeMs) {
      return (await query('DELETE FROM idempotency_keys WHERE created_at <= $1 RETURNING 1', [beforeMs])).length;
    },
  };
}
