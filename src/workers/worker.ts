/** A worker thread of the process (supervisor.ts): one whole server on the shared port, with the process's limiter. */
import type { AddressInfo } from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';
import { SharedTable } from '../limits/shared-table.ts';
import { supervisorSignals } from './signals.ts';
import type { ListeningMessage, WorkerData } from './supervisor.ts';
import { workerShare } from './shares.ts';
import { RemoteLimiter, SharedLimiterClock } from './remote-limiter.ts';
import { POSTGRES_POOL_SIZE } from '../storage/postgres/pool-size.ts';
import { CACHE_ENTRIES } from '../domain/ttl-cache.ts';

const { index, config: shared, limiterBuffer, connectionBuffer, redisLimiter } = workerData as WorkerData;
// The caches' budgets, the key and ban caches' entries and the PostgreSQL pool are the process's: each worker keeps its share.
const config = {
  ...shared,
  pageCacheBytes: Math.floor(shared.pageCacheBytes / shared.workers),
  petCacheBytes: Math.floor(shared.petCacheBytes / shared.workers),
};
// Tracing before the server's modules, as the CLI does for one thread: its hooks must see pg and ioredis load.
const tracing =
  config.otlpEndpoint === undefined ? undefined : (await import('../tracing/start.ts')).startTracing(config, { 'petstore.worker': index });
const { startServer } = await import('../server.ts');
const app = await startServer(config, tracing, [], {
  index,
  limiterTable: new SharedTable(limiterBuffer),
  connectionTable: new SharedTable(connectionBuffer),
  signals: supervisorSignals(parentPort!),
  port: parentPort!,
  poolSize: workerShare(POSTGRES_POOL_SIZE, index, shared.workers),
  cacheEntries: Math.ceil(CACHE_ENTRIES / shared.workers),
  limiter: redisLimiter && new RemoteLimiter(redisLimiter.port, new SharedLimiterClock(redisLimiter.clock)),
});
parentPort!.postMessage({ type: 'listening', address: app.server.address() as AddressInfo } satisfies ListeningMessage);
