/**
 * Runs the service: opens storage and the limiter a Config names, builds the app, listens, and on
 * SIGTERM or SIGINT stops accepting, lets in-flight requests finish, closes storage and exits 0.
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { MemoryRateLimiter } from './limits/memory.js';
import { RedisRateLimiter } from './limits/redis.js';
import { createLogger } from './logger.js';
import { createMetrics } from './metrics.js';
import { openStore } from './storage/open.js';

/** Longest a graceful close may take before the process exits anyway. */
const CLOSE_DEADLINE_MS = 10_000;

export async function startServer(config: Readonly<Config>): Promise<FastifyInstance> {
  const logger = createLogger(config.logLevel);
  const metrics = createMetrics();
  const store = await openStore(config);
  const limiter = config.redisUrl
    ? new RedisRateLimiter({ url: config.redisUrl, keyPrefix: config.redisKeyPrefix, log: logger, metrics })
    : new MemoryRateLimiter();
  const app = await buildApp(config, { store, limiter, logger, metrics });
  app.addHook('onClose', async () => {
    await limiter.close();
    await store.close();
  });
  await app.listen({ port: config.port, host: config.host });

  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    const deadline = setTimeout(() => {
      app.log.error('graceful shutdown timed out');
      process.exit(1);
    }, CLOSE_DEADLINE_MS);
    deadline.unref();
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        app.log.error({ err }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
  return app;
}
