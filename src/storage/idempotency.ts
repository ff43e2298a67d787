/** How a stored idempotency row answers a new claim; shared by every engine. */
import type { IdempotencyClaim } from './store.ts';

export interface IdempotencyRow {
  request_hash: string;
  created_at: number | bigint | string;
  status: number | null;
  body: string | null;
  location: string | null;
}

/** The claim an existing, unexpired row gives; 'take-over' when its request died without finishing. */
export function claimOf(row: IdempotencyRow, requestHash: string, nowMs: number, staleAfterMs: number): IdempotencyClaim | 'take-over' {
  if (row.status === null) {
    if (Number(row.created_at) <= nowMs - staleAfterMs) return 'take-over';
    return row.request_hash === requestHash ? { state: 'in_flight' } : { state: 'mismatch' };
  }
  if (row.request_hash !== requestHash) return { state: 'mismatch' };
  return { state: 'done', response: { status: row.status, body: row.body!, location: row.location! } };
}
