/** What Redis holds for a subject's window (src/limits/redis-scripts.ts): each instance's part, summed. */

/** The hash of a subject's window, as the limiter names it. */
export const windowKey = (prefix: string, subject: string, window: string): string => `${prefix}:{${subject}}:${window}:by-instance`;

/** The window's total in Redis: every instance's part; 0 when Redis has none. */
export async function countedIn(redis: { hgetall(key: string): Promise<Record<string, string>> }, key: string): Promise<number> {
  const fields = await redis.hgetall(key);
  let total = 0;
  for (const [field, value] of Object.entries(fields)) if (field !== 's') total += Number(value);
  return total;
}
