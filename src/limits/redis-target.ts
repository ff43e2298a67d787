/** The Redis limiter's target as the configuration names it (REDIS_URL or REDIS_CLUSTER_NODES), read once at start. */
import { redisUrls, type Config } from '../config.ts';
import { readNamedFile } from '../config/named-files.ts';
import type { RedisTarget } from './open.ts';

export function redisTarget(config: Readonly<Config>): RedisTarget | undefined {
  const urls = redisUrls(config);
  if (!urls) return undefined;
  return {
    urls,
    cluster: config.redisClusterNodes !== undefined,
    tlsCa: config.redisTlsCaFile === undefined ? undefined : readNamedFile('REDIS_TLS_CA_FILE', config.redisTlsCaFile),
    keyPrefix: config.redisKeyPrefix,
    maxBlock: config.rateLimitBlockMax,
  };
}
