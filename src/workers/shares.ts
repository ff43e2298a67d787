/**
 * A worker's share of something the process has `total` of (its PostgreSQL connections): near-equal shares that
 * add up to the total, and at least one each.
 */
export function workerShare(total: number, index: number, workers: number): number {
  const base = Math.floor(total / workers);
  return Math.max(1, base + (index <= total % workers ? 1 : 0));
}
