/**
 * Runs the service: opens storage and the limiter a Config names, builds the app, listens, and on
 * SIGTERM or SIGINT shuts down gracefully (see shutdown.ts): drains for SHUTDOWN_DRAIN_MS, stops
 * accepting, lets the connections still open end, closes storage and the limiter, and exits 0 within
 * SHUTDOWN_TIMEOUT_MS.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { ConfigError, redisUrls, type Config } from './config.ts';
import { docsUrlBeside } from './http/urls.ts';
import { startMetricsListener } from './http/server/metrics-listener.ts';
import type { TlsFiles } from './http/server/node-server.ts';
import type { RateLimiter } from './limits/limiter.ts';
import { MemoryRateLimiter } from './limits/memory.ts';
import { createLogger } from './logger.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { shutDownGracefully } from './shutdown.ts';
import { describePostgres, openStore, withoutPassword } from './storage/open.ts';
import type { Tracing } from './tracing/start.ts';
import { packageVersion } from './version.ts';

/** Kept at the end of a shutdown, after the spans are flushed, to log and exit before the hard exit. */
const TRACING_FLUSH_RESERVE_MS = 200;

/** How long the start waits for Redis to answer before serving with the in-memory fallback. */
const REDIS_START_CHECK_MS = 2000;

/** A file a variable names, read at start: a missing or unreadable one stops the server with one clear line. */
function readNamedFile(variable: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(`${variable} cannot be read: ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

function readTls(config: Readonly<Config>): TlsFiles | undefined {
  if (!config.tls) return undefined;
  return { cert: readNamedFile('TLS_CERT', config.tls.certPath), key: readNamedFile('TLS_KEY', config.tls.keyPath) };
}

/** Where Redis is, for messages and the log: hosts and ports, never the credentials. */
function describeRedis(urls: readonly string[], cluster: boolean): string {
  const hosts = urls.map((url) => URL.parse(url)?.host || 'localhost');
  return cluster ? `the Redis Cluster seeded by ${hosts.join(', ')}` : `Redis at ${hosts[0]}`;
}

/** A variable's value with every password of the URLs it holds taken out. */
function withoutPasswords(message: string, urls: readonly string[]): string {
  return urls.reduce((text, url) => withoutPassword(text, url), message);
}

/**
 * The shared limiter when REDIS_URL or REDIS_CLUSTER_NODES is set, else the in-memory one. A Redis
 * that does not answer at start does not stop the server: it would serve exactly as it does when
 * Redis fails later (limits counted per instance until Redis is back), and refusing to start would
 * turn a Redis outage into a restart loop of every instance. The warning names the variable so the
 * operator knows what to fix.
 */
async function openLimiter(config: Readonly<Config>, logger: FastifyBaseLogger, metrics: Metrics): Promise<RateLimiter> {
  const urls = redisUrls(config);
  if (!urls) return new MemoryRateLimiter();
  const cluster = config.redisClusterNodes !== undefined;
  const tlsCa = config.redisTlsCaFile === undefined ? undefined : readNamedFile('REDIS_TLS_CA_FILE', config.redisTlsCaFile);
  // The Redis client is loaded only when Redis is named; a single instance never carries it.
  const { RedisRateLimiter } = await import('./limits/redis.ts');
  const limiter = new RedisRateLimiter({
    urls,
    cluster,
    tlsCa,
    keyPrefix: config.redisKeyPrefix,
    maxBlock: config.rateLimitBlockMax,
    log: logger,
    metrics,
  });
  const problem = await limiter.reachableWithin(REDIS_START_CHECK_MS);
  if (problem !== undefined) {
    const variable = cluster ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL';
    logger.warn(
      { limiter: { engine: 'redis', target: describeRedis(urls, cluster), reachable: false } },
      `${variable} names ${describeRedis(urls, cluster)}, which cannot be reached (${withoutPasswords(problem, urls)}): ` +
        'serving with rate limits counted in memory on this instance until it answers',
    );
  }
  return limiter;
}

/** What the start line says about the storage, the limiter and the address: never a password. */
function startFacts(config: Readonly<Config>, address: AddressInfo) {
  const storage =
    config.database.engine === 'sqlite'
      ? { engine: 'sqlite' as const, path: config.database.path === ':memory:' ? ':memory:' : resolve(config.database.path) }
      : { engine: 'postgres' as const, target: describePostgres(config.database.url) };
  const urls = redisUrls(config);
  const limiter = urls
    ? { engine: 'redis' as const, target: describeRedis(urls, config.redisClusterNodes !== undefined) }
    : { engine: 'memory' as const };
  const scheme = config.tls ? 'https' : 'http';
  const at = (host: string) => `${scheme}://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
  // A wildcard address is not one to browse to; from this machine, loopback reaches it.
  const local = address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '::1' : config.host;
  // Behind a proxy, the public address of the API names where clients find the docs page too.
  const publicDocs = /^https?:/.test(config.publicBaseUrl) ? docsUrlBeside(config.publicBaseUrl) : undefined;
  return { environment: config.environment, storage, limiter, address: at(address.address), docs: publicDocs ?? `${at(local)}/docs` };
}

function startMessage(version: string, facts: ReturnType<typeof startFacts>): string {
  const storage = facts.storage.engine === 'sqlite' ? `SQLite ${facts.storage.path}` : facts.storage.target;
  const limits = facts.limiter.engine === 'redis' ? `rate limits in ${facts.limiter.target}` : 'rate limits in memory';
  return `petstore ${version} serving ${facts.environment} on ${facts.address} (${storage}, ${limits}); docs at ${facts.docs}`;
}

/** Listening, with the usual failures (the port taken, a privileged port) said in terms of PORT and HOST. */
async function listen(app: FastifyInstance, config: Readonly<Config>): Promise<void> {
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const where = `${config.host}:${config.port}`;
    if (code === 'EADDRINUSE') throw new Error(`cannot listen on ${where}: another process uses it (set PORT or --port)`, { cause: err });
    if (code === 'EACCES') throw new Error(`cannot listen on ${where}: not allowed (ports below 1024 need privileges)`, { cause: err });
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
      throw new Error(`cannot listen on ${where}: no such address on this machine (set HOST or --host)`, { cause: err });
    }
    throw err;
  }
}

/** Starts the server; `tracing`, started by the CLI before this module was loaded, when it is on. */
export async function startServer(config: Readonly<Config>, tracing?: Tracing): Promise<FastifyInstance> {
  const logger = createLogger(config.logLevel, undefined, tracing?.logFields);
  const metrics = createMetrics();
  const store = await openStore(config, tracing?.traceSqlite, {
    info: (message) => logger.info(message),
    warn: (message) => logger.warn(message),
  });
  const limiter = await openLimiter(config, logger, metrics);
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
  await listen(app, config);
  const version = packageVersion();
  const facts = startFacts(config, app.server.address() as AddressInfo);
  app.log.info({ version, ...facts }, startMessage(version, facts));
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
    const timings = { drainMs: config.shutdownDrainMs, timeoutMs: config.shutdownTimeoutMs, proxied: config.trustProxy.kind !== 'none' };
    shutDownGracefully(app, timings, signalledAt).then(
      async () => {
        // The spans still queued leave last, within what is left of the bound.
        await tracing?.shutdown(Math.max(0, signalledAt + config.shutdownTimeoutMs - TRACING_FLUSH_RESERVE_MS - Date.now()));
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
