/**
 * Runs the service: configuration -> storage and limiter -> buildApp -> listen, and on SIGTERM or
 * SIGINT a graceful shutdown within SHUTDOWN_TIMEOUT_MS (shutdown.ts).
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from './app.ts';
import type { Config } from './config.ts';
import { readTls } from './config/named-files.ts';
import { reloadTlsOnSignal } from './http/server/tls-reload.ts';
import type { Server as HttpsServer } from 'node:https';
import { startMetricsListener } from './http/server/metrics-listener.ts';
import { listenRefusal } from './http/server/listen-refusal.ts';
import type { RateLimiter } from './limits/limiter.ts';
import { openLimiter } from './limits/open.ts';
import { redisTarget } from './limits/redis-target.ts';
import type { SharedTable } from './limits/shared-table.ts';
import { limiterTable } from './limits/subject-records.ts';
import { createLogger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { shutDownOnSignals } from './shutdown.ts';
import { nextStep, startFacts, startMessage } from './start-line.ts';
import { openStore, serverOpenOptions } from './storage/open.ts';
import type { Store } from './storage/store.ts';
import type { Tracing } from './tracing/start.ts';
import { packageVersion } from './version.ts';
import { processSignals, type SignalSource } from './workers/signals.ts';
import { answerMetricsRequests, registryExposition, supervisorExposition, workerMetrics } from './workers/process-metrics.ts';
import type { MessagePort } from 'node:worker_threads';

/** A server that is one of the process's workers (src/workers/supervisor.ts). */
export interface WorkerRole {
  /** 1 to WORKERS, on every line it logs. */
  index: number;
  /** The process's one limiter state. */
  limiterTable: SharedTable;
  /** The process's open connections, which MAX_CONNECTIONS and MAX_CONNECTIONS_PER_ADDRESS cap. */
  connectionTable: SharedTable;
  /** The supervisor's signals, passed on: a worker thread hears none of its own. */
  signals: SignalSource;
  /** Where the supervisor asks for this worker's metrics, and the process's exposition it serves at /metrics. */
  port: MessagePort;
  /** This worker's share of the process's PostgreSQL connections. */
  poolSize: number;
  /** This worker's share of the keys the process's key and ban caches hold. */
  cacheEntries: number;
  /** With Redis, the process's limiter, asked over a port (workers/limiter-owner.ts); the shared table's otherwise. */
  limiter?: RateLimiter;
}

/** Listening, with the usual failures (the port taken, a privileged port) said in terms of PORT and HOST. */
async function listen(app: FastifyInstance, config: Readonly<Config>, reusePort: boolean): Promise<void> {
  try {
    // Workers listen on one port beside each other, the kernel spreading connections among them.
    await app.listen({ port: config.port, host: config.host, ...(reusePort && { reusePort }) });
  } catch (err) {
    throw listenRefusal(err, config.host, config.port);
  }
}

/**
 * Starts the server; `tracing`, started by the CLI before this module was loaded, when it is on; `warnings`
 * about the environment (a variable that looks like a setting but is not one), logged first.
 */
export async function startServer(
  config: Readonly<Config>,
  tracing?: Tracing,
  warnings: readonly string[] = [],
  role?: WorkerRole,
): Promise<FastifyInstance> {
  // A worker writes its lines itself, at once: through the thread's process.stdout, those queued when it ends would be lost.
  const root = createLogger(config.logLevel, role && pino.destination({ dest: 1, sync: true }), tracing?.logFields);
  const logger = role ? root.child({ worker: role.index }) : root;
  const signals = role?.signals ?? processSignals;
  for (const warning of warnings) logger.warn(warning);
  const metrics = createMetrics();
  const store = await openStore(config.database, {
    ...serverOpenOptions(config, logger),
    traceSqlite: tracing?.traceSqlite,
    poolSize: role?.poolSize,
  });
  const table = role?.limiterTable ?? limiterTable(config.rateLimitMemoryBytes);
  const limiter = role?.limiter ?? (await openLimiter(redisTarget(config), { log: logger, metrics, table }));
  const tls = readTls(config);
  if (role) answerMetricsRequests(role.port, metrics.registry);
  else workerMetrics(metrics.registry, 1).serving.set(1);
  const app = await buildApp(config, {
    store,
    limiter,
    logger,
    metrics,
    tls,
    connectionCounts: role?.connectionTable,
    cacheEntries: role?.cacheEntries,
    exposition: role && supervisorExposition(role.port),
  });
  if (config.database.engine === 'sqlite' && config.database.path !== ':memory:')
    metrics.watchFiles({ database: config.database.path, backupDir: config.backupDir });
  const metricsListener =
    config.metricsPort === undefined || role
      ? undefined
      : await startMetricsListener(registryExposition(metrics.registry), config.metricsPort, config.metricsHost);
  app.addHook('onClose', async () => {
    metricsListener?.close();
    await limiter.close();
    await store.close();
  });
  await listen(app, config, role !== undefined);
  if (role) {
    // The supervisor says the rest once for the process.
    app.log.info(`worker ${role.index} serving`);
  } else {
    await sayStarted(app, config, store, metricsListener !== undefined);
  }
  if (tls)
    reloadTlsOnSignal(
      app.server as unknown as HttpsServer,
      config,
      app.log,
      { certificate: tls.cert, inUse: metrics.tlsCertificateInUse },
      signals,
    );
  // `systemctl reload` on plain HTTP: nothing to read again, and a reload must never end the server.
  else signals.on('SIGHUP', () => app.log.info('SIGHUP: nothing to reload without TLS_CERT; other settings are read at start'));
  shutDownOnSignals(
    app,
    { drainMs: config.shutdownDrainMs, timeoutMs: config.shutdownTimeoutMs, proxied: config.trustProxy.kind !== 'none' },
    tracing && ((withinMs) => tracing.shutdown(withinMs)),
    signals,
  );
  return app;
}

/** The start line, the metrics listener's, and the next step (a key to create, or the docs to read). */
async function sayStarted(app: FastifyInstance, config: Readonly<Config>, store: Store, metricsListening: boolean): Promise<void> {
  const version = packageVersion();
  const facts = startFacts(config, app.server.address() as AddressInfo);
  app.log.info({ version, ...facts }, startMessage(version, facts));
  if (metricsListening) app.log.info({ address: `http://${config.metricsHost}:${config.metricsPort}/metrics` }, 'metrics listener started');
  // Advice only: a store that cannot answer now leaves the line that holds either way.
  const hasKey = await store.hasUsableKey(config.environment, Date.now()).catch(() => true);
  app.log.info({ environment: facts.environment, docs: facts.docs }, nextStep(facts, hasKey));
}
