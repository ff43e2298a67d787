/**
 * The limiter's Redis connection: one Redis (REDIS_URL) or a Cluster (REDIS_CLUSTER_NODES), with TLS and ACL
 * users as managed services offer them. Every option keeps a request from waiting on Redis: no offline queue,
 * no retries, short timeouts, reconnecting by itself while the in-memory fallback answers.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

export interface RedisTarget {
  /** One URL for a single Redis; the seed nodes of a cluster when `cluster` is set. */
  urls: readonly string[];
  cluster: boolean;
  /** Certificate authorities (PEM) for `rediss://`; the system's when absent. */
  tlsCa?: Buffer;
  timeoutMs: number;
}

/** What both clients offer the limiter: scripts defined once, status and connection events. */
export type RedisClient = Redis | Cluster;

function nodeOptions(target: RedisTarget): RedisOptions {
  return {
    // Fail at once while disconnected instead of queueing: the fallback answers meanwhile.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: target.timeoutMs,
    connectTimeout: 1000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  };
}

/** TLS options for `rediss://` URLs: the CA file's authorities when given. */
function tlsFor(url: URL, tlsCa: Buffer | undefined): RedisOptions['tls'] {
  if (url.protocol !== 'rediss:') return undefined;
  return tlsCa ? { ca: tlsCa } : {};
}

export function connectRedis(target: RedisTarget): RedisClient {
  const first = new URL(target.urls[0]!);
  if (!target.cluster) {
    return new Redis(target.urls[0]!, {
      ...nodeOptions(target),
      tls: tlsFor(first, target.tlsCa),
      // Concurrent requests' scripts leave in one write: fewer syscalls on both sides under load.
      enableAutoPipelining: true,
    });
  }
  // Nodes found through the seeds (CLUSTER SLOTS) are reached with the seeds' credentials and TLS:
  // a managed cluster has one user and one certificate chain for all of them.
  const options: ClusterOptions = {
    redisOptions: {
      ...nodeOptions(target),
      username: decodeURIComponent(first.username) || undefined,
      password: decodeURIComponent(first.password) || undefined,
      tls: tlsFor(first, target.tlsCa),
    },
    enableOfflineQueue: false,
    // Not in a cluster: ioredis refuses an automatic pipeline whose scripts' keys sit in different
    // slots of one node ("All keys in the pipeline should belong to the same slots allocation group"),
    // which concurrent requests of different keys produce all the time.
    enableAutoPipelining: false,
    // A failover moves slots to a promoted replica; the map is read again every second, so the
    // service returns to the cluster soon after, without waiting for a redirection.
    slotsRefreshInterval: 1000,
    slotsRefreshTimeout: target.timeoutMs,
    clusterRetryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  };
  const seeds = target.urls.map((url) => {
    const parsed = new URL(url);
    return { host: parsed.hostname.replace(/^\[|\]$/g, ''), port: Number(parsed.port || 6379) };
  });
  return new Cluster(seeds, options);
}
