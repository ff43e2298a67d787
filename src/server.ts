/**
 * Runs the service: opens storage and the limiter a Config names, builds the app, listens, and on
 * SIGTERM or SIGINT shuts down gracefully (see shutdown.ts): drains for SHUTDOWN_DRAIN_MS, stops
 * accepting, lets in-flight requests finish, closes storage and the limiter, and exits 0 within
 * SHUTDOWN_TIMEOUT_MS.
 */
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { ConfigError, type Config } from './config.ts';
import { startMetricsListener } from './http/metrics-listener.ts';
import type { TlsFiles } from './http/node-server.ts';
import { MemoryRateLimiter } from './limits/memory.ts';
import { createLogger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { shutDownGracefully } from './shutdown.ts';
import { openStore } from './storage/open.ts';

/** Reads the TLS files at start, so a missing or unreadable one stops the server with one clear line. */
function readTls(config: Readonly<Config>): TlsFiles | undefined {
  if (!config.tls) return undefined;
  const read = (name: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new ConfigError(`${name} cannot be read: ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  };
  return { cert: read('TLS_CERT', config.tls.certPath), key: read('TLS_KEY', config.tls.keyPath) };
}

/**
 * V8 lets the old generation grow to about four times what survived the last full collection before
 * collecting again. The service keeps little alive (some 20 MB) but, under load, promotes much that
 * dies soon after (requests waiting on the database), so the heap swelled to about 90 MB between full
 * collections. Growing by a factor of two instead cut the peak RSS of an instance under the benchmark
 * by about 40 MiB, with no throughput lost (BENCHMARKS.md). Unlike the young generation's size, this
 * factor is read at every collection, so it can be set here rather than on every command line.
 */
function boundHeapGrowth(): void {
  v8.setFlagsFromString('--heap-growing-percent=100');
}

export async function startServer(config: Readonly<Config>): Promise<FastifyInstance> {
  boundHeapGrowth();
  const logger = createLogger(config.logLevel);
  const metrics = createMetrics();
  const store = await openStore(config);
  // The Redis client is loaded only when REDIS_URL is set; a single instance never carries it.
  const limiter = config.redisUrl
    ? new (await import('./limits/redis.ts')).RedisRateLimiter({
        url: config.redisUrl,
        keyPrefix: config.redisKeyPrefix,
        log: logger,
        metrics,
      })
    : new MemoryRateLimiter();
  const app = await buildApp(config, { store, limiter, logger, metrics, tls: readTls(config) });
  app.addHook('onClose', async () => {
    await limiter.close();
    await store.close();
  });
  const metricsListener =
    config.metricsPort === undefined ? undefined : await startMetricsListener(metrics, config.metricsPort, config.metricsHost);
  app.addHook('onClose', async () => {
    metricsListener?.close();
  });
  await app.listen({ port: config.port, host: config.host });
  if (metricsListener) app.log.info({ address: `http://${config.metricsHost}:${config.metricsPort}/metrics` }, 'metrics listener started');

  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    const signalledAt = Date.now();
    app.log.info({ signal }, 'shutting down');
    // The graceful path cuts the last connections a second before this; only storage or the limiter
    // hanging on close reaches it.
    const hardExit = setTimeout(() => {
      app.log.error('graceful shutdown timed out');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    hardExit.unref();
    shutDownGracefully(app, { drainMs: config.shutdownDrainMs, timeoutMs: config.shutdownTimeoutMs }, signalledAt).then(
      () => {
        app.log.info({ ms: Date.now() - signalledAt }, 'shut down');
        process.exit(0);
      },
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
