/** How a stored idempotency claim answers a new request for the same key; shared by every engine. */
import { randomBytes } from 'node:crypto';
import { toPet } from './rows.ts';
import type { FoundIdempotencyClaim } from './store.ts';

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

/** A new claim's fencing token: random, so no two claims of a key, on any instance, share one. */
export function newClaimToken(): string {
  return randomBytes(16).toString('base64url');
}

/**
 * The claim an existing, unexpired row gives; 'take-over' once an unfinished claim is stale (its request
 * died, or is slow: its token then no longer matches, and its create makes nothing).
 */
export function claimOf(row: ClaimRow, requestHash: string, nowMs: number, staleAfterMs: number): FoundIdempotencyClaim | 'take-over' {
  if (row.pet_id === null) {
    const staleAtMs = Number(row.created_at) + staleAfterMs;
    if (staleAtMs <= nowMs) return 'take-over';
    return row.request_hash === requestHash ? { state: 'in_flight', staleAtMs } : { state: 'mismatch' };
  }
  if (row.request_hash !== requestHash) return { state: 'mismatch' };
  return { state: 'done', pet: toPet({ id: row.pet_id, name: row.name!, category_id: row.category_id!, status: row.status! }) };
}

/** The same, for a request that only looks: an unfinished claim is in flight however old, or a mismatch. */
export function foundClaimOf(row: ClaimRow, requestHash: string, staleAfterMs: number): FoundIdempotencyClaim {
  // claimOf at the beginning of time, when nothing is stale yet.
  return claimOf(row, requestHash, -Infinity, staleAfterMs) as FoundIdempotencyClaim;
}
