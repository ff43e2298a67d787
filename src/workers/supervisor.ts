/**
 * The process's main thread when WORKERS is above 1 (docs/workers.md): it applies migrations once, makes the
 * state the workers share (the limiter's table, the connection counts), starts WORKERS worker threads that each
 * serve on the one port, passes SIGTERM, SIGINT and SIGHUP on to them, and starts again, with a growing pause,
 * a worker that ends unasked. It serves no request itself.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { Config } from '../config.ts';
import { connectionTable } from '../http/server/connection-caps.ts';
import { startMetricsListener } from '../http/server/metrics-listener.ts';
import type { WindowLimit } from '../limits/limiter.ts';
import { openLimiter } from '../limits/open.ts';
import { redisTarget } from '../limits/redis-target.ts';
import { limiterTable } from '../limits/subject-records.ts';
import { limiterMetrics } from '../metrics.ts';
import { serveLimiter } from './limiter-owner.ts';
import { SharedLimiterClock } from './remote-limiter.ts';
import { createLogger } from '../logger.ts';
import { nextStep, startFacts, startMessage } from '../start-line.ts';
import { openStore, serverOpenOptions } from '../storage/open.ts';
import { packageVersion } from '../version.ts';
import { ProcessMetrics } from './process-metrics.ts';
import type { ServerSignal, SignalMessage } from './signals.ts';

/** What a worker is started with (structured-cloned; the tables' buffers are shared, not copied). */
export interface WorkerData {
  index: number;
  config: Readonly<Config>;
  limiterBuffer: SharedArrayBuffer;
  connectionBuffer: SharedArrayBuffer;
  /** With Redis: the port the process's limiter answers this worker on, and the clock it decides by. */
  redisLimiter?: { port: MessagePort; clock: SharedArrayBuffer };
}

/** A worker's word that it listens, with the address it listens on. */
export interface ListeningMessage {
  type: 'listening';
  address: AddressInfo;
}

/** The first pause before a worker that ended is started again; it doubles up to MAX_RESTART_PAUSE_MS while the worker keeps ending. */
export const FIRST_RESTART_PAUSE_MS = 100;
export const MAX_RESTART_PAUSE_MS = 30_000;
/** A worker that served this long before it ended is started again after the first pause, its back-off forgotten. */
const STEADY_MS = 60_000;

/** The worker's module, as this one is run: TypeScript from src/ (tests), JavaScript from dist/. */
const WORKER_MODULE = new URL(`./worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

export async function superviseWorkers(config: Readonly<Config>, warnings: readonly string[] = []): Promise<void> {
  const log = createLogger(config.logLevel).child({ worker: 0 });
  for (const warning of warnings) log.warn(warning);
  // Migrations once, here, before any worker opens the database: the workers then find it current.
  const store = await openStore(config.database, { ...serverOpenOptions(config, log), poolSize: 1 });

  const table = limiterTable(config.rateLimitMemoryBytes);
  const connections = connectionTable(config.maxConnections);
  const metrics = new ProcessMetrics(() => workers.values(), config.workers);
  // With Redis, the process is one instance toward it: the one limiter here, deciding for every worker.
  const target = redisTarget(config);
  const clock = SharedLimiterClock.create();
  const redisLimiter =
    target &&
    (await openLimiter(target, { log, metrics: limiterMetrics(metrics.registry), table, onClock: (offset) => clock.set(offset) }));
  const interned = new Map<string, readonly WindowLimit[]>();
  const workers = new Map<number, Worker>();
  let stopping = false;
  // A worker hears a signal once it serves: one still starting is told when it says it listens.
  const servingWorkers = new Set<Worker>();
  const serving = () => metrics.workersServing.set(servingWorkers.size);
  const pending: ServerSignal[] = [];
  const tell = (worker: Worker, signal: ServerSignal) => worker.postMessage({ type: 'signal', signal } satisfies SignalMessage);
  const pass = (signal: ServerSignal) => {
    if (signal !== 'SIGHUP') pending.push(signal);
    for (const worker of servingWorkers) tell(worker, signal);
  };
  // The metrics listener, up before any worker serves: a process that answers has its metrics answered too.
  const listener: { metrics?: Server } = {
    metrics: config.metricsPort === undefined ? undefined : await startMetricsListener(metrics, config.metricsPort, config.metricsHost),
  };
  const stop = (signal: ServerSignal) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down every worker');
    pass(signal);
    const ended = [...workers.values()].map((worker) => new Promise<number>((resolve) => worker.once('exit', resolve)));
    void Promise.all(ended).then(async (codes) => {
      listener.metrics?.close();
      await redisLimiter?.close().catch((err: unknown) => log.warn({ err }, 'the rate limiter did not close cleanly'));
      // A worker that reached the hard exit (its storage or limiter hung on close) makes the process's exit 1, as one server's would.
      const code = codes.some((c) => c !== 0) ? 1 : 0;
      log.info({ code }, 'every worker shut down');
      // Workers' lines reach standard output through this thread: written out before the process ends.
      process.stdout.write('', () => process.exit(code));
    });
  };
  // Heard from the start: a signal before every worker serves must not end the process unshut.
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.on('SIGHUP', () => pass('SIGHUP'));

  /** Starts worker `index`; resolves with its address once it listens, rejects with its error if it ends before. */
  const start = (index: number, pauseMs: number): Promise<AddressInfo> =>
    new Promise((listening, failed) => {
      const data: WorkerData = { index, config, limiterBuffer: table.buffer, connectionBuffer: connections.buffer };
      const channel = redisLimiter && new MessageChannel();
      if (channel) {
        serveLimiter(channel.port1, redisLimiter!, interned);
        data.redisLimiter = { port: channel.port2, clock: clock.buffer };
      }
      const worker = new Worker(WORKER_MODULE, { workerData: data, transferList: channel ? [channel.port2] : [] });
      const startedAt = performance.now();
      // threadId reads -1 once the worker has ended: kept while it runs, for taking back its stripes.
      const threadId = worker.threadId;
      let served = false;
      let failure: Error | undefined;
      workers.set(index, worker);
      metrics.serve(worker);
      worker.on('message', (message: Partial<ListeningMessage>) => {
        if (message.type !== 'listening' || !message.address) return;
        served = true;
        servingWorkers.add(worker);
        for (const signal of pending) tell(worker, signal);
        serving();
        listening(message.address);
      });
      worker.once('error', (err) => {
        failure = err instanceof Error ? err : new Error(String(err));
        if (served) log.error({ err, worker: index }, `worker ${index} failed`);
      });
      worker.once('exit', (code) => {
        workers.delete(index);
        servingWorkers.delete(worker);
        channel?.port1.close();
        serving();
        // Stripes it held when it ended are taken back, so the others are never kept waiting.
        table.releaseHeldBy(threadId);
        connections.releaseHeldBy(threadId);
        if (!served) failed(failure ?? new Error(`worker ${index} ended before it served (exit code ${code})`));
        if (stopping || !started) return;
        const steady = performance.now() - startedAt >= STEADY_MS;
        const pause = served && steady ? FIRST_RESTART_PAUSE_MS : Math.min(MAX_RESTART_PAUSE_MS, pauseMs * 2);
        log.error({ worker: index, code, restartInMs: pause }, `worker ${index} ended unasked: starting it again in ${pause} ms`);
        metrics.workerRestarts.inc();
        void sleep(pause).then(() => (stopping ? undefined : start(index, pause).catch(() => undefined)));
      });
    });

  // A start that fails (the port taken, the database refused) ends the process with the first worker's reason.
  let started = false;
  let addresses: AddressInfo[];
  try {
    addresses = await Promise.all(Array.from({ length: config.workers }, (_, i) => start(i + 1, FIRST_RESTART_PAUSE_MS)));
  } catch (err) {
    stopping = true;
    await Promise.all([...workers.values()].map((worker) => worker.terminate()));
    listener.metrics?.close();
    await redisLimiter?.close();
    await store.close();
    throw err;
  }
  started = true;
  const version = packageVersion();
  const facts = startFacts(config, addresses[0]!);
  log.info({ version, ...facts }, startMessage(version, facts));
  if (listener.metrics) log.info({ address: `http://${config.metricsHost}:${config.metricsPort}/metrics` }, 'metrics listener started');
  // Advice only: a store that cannot answer now leaves the line that holds either way.
  const hasKey = await store.hasUsableKey(config.environment, Date.now()).catch(() => true);
  log.info({ environment: facts.environment, docs: facts.docs }, nextStep(facts, hasKey));
  await store.close();
}
