/**
 * Runs the service: configuration -> storage and limiter -> buildApp -> listen, and on SIGTERM or
 * SIGINT a graceful shutdown within SHUTDOWN_TIMEOUT_MS (shutdown.ts).
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { redisUrls, type Config } from './config.ts';
import { readNamedFile, readTls } from './config/named-files.ts';
import { reloadTlsOnSignal } from './http/server/tls-reload.ts';
import type { Server as HttpsServer } from 'node:https';
import { startMetricsListener } from './http/server/metrics-listener.ts';
import { openLimiter, type RedisTarget } from './limits/open.ts';
import { limiterTable } from './limits/subject-records.ts';
import { createLogger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { shutDownOnSignals } from './shutdown.ts';
import { nextStep, startFacts, startMessage } from './start-line.ts';
import { openStore } from './storage/open.ts';
import type { Tracing } from './tracing/start.ts';
import { packageVersion } from './version.ts';

/** The Redis limiter's target, when REDIS_URL or REDIS_CLUSTER_NODES names one. */
function redisTarget(config: Readonly<Config>): RedisTarget | undefined {
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

/**
 * Starts the server; `tracing`, started by the CLI before this module was loaded, when it is on; `warnings`
 * about the environment (a variable that looks like a setting but is not one), logged first.
 */
export async function startServer(config: Readonly<Config>, tracing?: Tracing, warnings: readonly string[] = []): Promise<FastifyInstance> {
  const logger = createLogger(config.logLevel, undefined, tracing?.logFields);
  for (const warning of warnings) logger.warn(warning);
  const metrics = createMetrics();
  const store = await openStore(config.database, {
    synchronous: config.sqliteSynchronous,
    lockWaitMs: config.sqliteLockWaitMs,
    migrationWait: { waitMs: config.migrationLockWaitMs, onWait: (message) => logger.warn(message) },
    migrations: { mode: config.migrations, statementTimeoutMs: config.migrationStatementTimeoutMs },
    traceSqlite: tracing?.traceSqlite,
    log: { info: (message) => logger.info(message), warn: (message) => logger.warn(message) },
  });
  const limiter = await openLimiter(redisTarget(config), { log: logger, metrics, table: limiterTable(config.rateLimitMemoryBytes) });
  const tls = readTls(config);
  const app = await buildApp(config, { store, limiter, logger, metrics, tls });
  if (config.database.engine === 'sqlite' && config.database.path !== ':memory:')
    metrics.watchFiles({ database: config.database.path, backupDir: config.backupDir });
  const metricsListener =
    config.metricsPort === undefined ? undefined : await startMetricsListener(metrics, config.metricsPort, config.metricsHost);
  app.addHook('onClose', async () => {
    metricsListener?.close();
    await limiter.close();
    await store.close();
  });
  await listen(app, config);
  const version = packageVersion();
  const facts = startFacts(config, app.server.address() as AddressInfo);
  app.log.info({ version, ...facts }, startMessage(version, facts));
  if (metricsListener) app.log.info({ address: `http://${config.metricsHost}:${config.metricsPort}/metrics` }, 'metrics listener started');
  // Advice only: a store that cannot answer now leaves the line that holds either way.
  const hasKey = await store.hasUsableKey(config.environment, Date.now()).catch(() => true);
  app.log.info({ environment: facts.environment, docs: facts.docs }, nextStep(facts, hasKey));
  if (tls)
    reloadTlsOnSignal(app.server as unknown as HttpsServer, config, app.log, { certificate: tls.cert, inUse: metrics.tlsCertificateInUse });
  // `systemctl reload` on plain HTTP: nothing to read again, and a reload must never end the server.
  else process.on('SIGHUP', () => app.log.info('SIGHUP: nothing to reload without TLS_CERT; other settings are read at start'));
  shutDownOnSignals(
    app,
    { drainMs: config.shutdownDrainMs, timeoutMs: config.shutdownTimeoutMs, proxied: config.trustProxy.kind !== 'none' },
    tracing && ((withinMs) => tracing.shutdown(withinMs)),
  );
  return app;
}
