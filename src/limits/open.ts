/**
 * Opens the limiter a configuration names: the shared Redis one when given a Redis target, else the
 * in-memory one. The only place that chooses; the Redis client is loaded only when Redis is named.
 */
import type { FastifyBaseLogger } from 'fastify';
import { withoutPassword } from '../domain/redaction.ts';
import type { LimiterMetrics } from '../metrics.ts';
import type { RateLimiter } from './limiter.ts';
import { MemoryRateLimiter } from './memory.ts';
import type { SharedTable } from './shared-table.ts';

/** How long the start waits for Redis to answer before serving with the in-memory fallback. */
const REDIS_START_CHECK_MS = 2000;

/** A Redis deployment to count in: one URL (REDIS_URL) or a cluster's seed nodes (REDIS_CLUSTER_NODES). */
export interface RedisTarget {
  urls: readonly string[];
  cluster: boolean;
  /** The CA certificate that rediss:// URLs are checked against, when not the system's. */
  tlsCa?: Buffer;
  keyPrefix: string;
  maxBlock: number;
}

/** Where Redis is, for messages and the log: hosts and ports, never the credentials. */
export function describeRedis(urls: readonly string[], cluster: boolean): string {
  const hosts = urls.map((url) => URL.parse(url)?.host || 'localhost');
  return cluster ? `the Redis Cluster seeded by ${hosts.join(', ')}` : `Redis at ${hosts[0]}`;
}

/** A message with every password of the URLs in it taken out. */
function withoutPasswords(message: string, urls: readonly string[]): string {
  return urls.reduce((text, url) => withoutPassword(text, url), message);
}

/**
 * A Redis that does not answer at start does not stop the server: it serves exactly as it does when
 * Redis fails later (limits counted per instance until Redis is back), where refusing to start would
 * turn a Redis outage into a restart loop of every instance. The warning names the variable to fix.
 */
export async function openLimiter(
  target: RedisTarget | undefined,
  {
    log,
    metrics,
    table,
    onClock,
  }: { log: FastifyBaseLogger; metrics: LimiterMetrics; table: SharedTable; onClock?: (offsetMs: number) => void },
): Promise<RateLimiter> {
  if (!target) return new MemoryRateLimiter({ table });
  const { RedisRateLimiter } = await import('./redis.ts');
  const limiter = new RedisRateLimiter({ ...target, log, metrics, fallbackTable: table, onClock });
  const problem = await limiter.reachableWithin(REDIS_START_CHECK_MS);
  if (problem !== undefined) {
    const where = describeRedis(target.urls, target.cluster);
    log.warn(
      { limiter: { engine: 'redis', target: where, reachable: false } },
      `${target.cluster ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL'} names ${where}, which cannot be reached ` +
        `(${withoutPasswords(problem, target.urls)}): serving with rate limits counted in memory on this instance until it answers`,
    );
  }
  return limiter;
}
