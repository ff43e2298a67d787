/** How a stored idempotency claim answers a new request for the same key; shared by every engine. */
import { toPet } from './rows.ts';
import type { IdempotencyClaim } from './store.ts';

/**
 * A claim read with its pet joined in: pet_id and the pet's columns are null until the claim's create
 * committed, and a foreign key keeps the pet of a finished claim.
 */
export interface ClaimRow {
  request_hash: string;
  created_at: number | bigint | string;
  pet_id: bigint | string | null;
  name: string | null;
  category_id: bigint | string | null;
  status: string | null;
}

/** The claim an existing, unexpired row gives; 'take-over' when its request died without finishing. */
export function claimOf(row: ClaimRow, requestHash: string, nowMs: number, staleAfterMs: number): IdempotencyClaim | 'take-over' {
  if (row.pet_id === null) {
    if (Number(row.created_at) <= nowMs - staleAfterMs) return 'take-over';
    return row.request_hash === requestHash ? { state: 'in_flight' } : { state: 'mismatch' };
  }
  if (row.request_hash !== requestHash) return { state: 'mismatch' };
  return { state: 'done', pet: toPet({ id: row.pet_id, name: row.name!, category_id: row.category_id!, status: row.status! }) };
}
