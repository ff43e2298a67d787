/**
 * Prometheus metrics, one registry per app so tests never share counters. Labels take small fixed sets of
 * values, so series cannot grow without bound nor name a caller. prom-client's default process metrics keep
 * their usual names (`process_*`, `nodejs_*`) for the common dashboards.
 */
import { collectDefaultMetrics, Counter, Gauge, Registry, type Metric } from 'prom-client';
import { PLANS } from './domain/plans.ts';
import { requestMetrics } from './request-metrics.ts';
import { PROCESS_WIDE, resourceMetrics } from './resource-metrics.ts';

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/**
 * The default metrics describe the process and start watchers that are never stopped, so they are made once
 * per process and served by every app's registry: an app closed in a test leaves nothing running.
 */
let processMetrics: Registry | undefined;

function defaultProcessMetrics(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

/** A cache whose memory the metrics report: the bytes its entries hold and how many there are. */
export interface WatchedCache {
  readonly bytes: number;
  readonly size: number;
}

/** The caches by name, the values of the `cache` label: list pages, the last pages' codings, pets by id. */
export type CacheName = 'pages' | 'last_pages' | 'pets';

/**
 * Sets every series of a labelled counter that an alert or a panel reads to 0 at start: a series that first
 * appears at its first event has no increase to show for it, so the first ban or 503 of each kind after a
 * start would go uncounted (deploy/prometheus/alerts.yml).
 */
function startedAtZero<T extends string>(counter: Counter<T>, labelSets: readonly Partial<Record<T, string>>[]): Counter<T> {
  for (const labels of labelSets) counter.inc(labels, 0);
  return counter;
}

/** The operations whose 5xx answers the alerts and the dashboard read. */
const OPERATIONS = ['listPets', 'getPet', 'createPet'] as const;

export function createMetrics() {
  const registry = new Registry();
  // getMetricsAsArray is typed as plain data, but gives the metrics themselves.
  for (const metric of defaultProcessMetrics().getMetricsAsArray()) registry.registerMetric(metric as unknown as Metric);
  let poolStats: (() => PoolStats) | undefined;
  let isReady: (() => Promise<boolean>) | undefined;
  /** The scrape's readiness check, which the pool's figures are read after: its own query is not a request waiting. */
  let readinessChecked: Promise<unknown> = Promise.resolve();
  const caches = new Map<CacheName, WatchedCache>();
  return {
    registry,
    /** Memory limit, the SQLite files and their room, the newest backup, the TLS certificate's end (resource-metrics.ts). */
    ...resourceMetrics(registry),
    /** Where database pool figures come from (engines with a pool only). */
    watchPool(stats: () => PoolStats) {
      poolStats = stats;
    },
    /** The readiness check /readyz makes, run at each scrape (the app's, once storage is open). */
    watchReadiness(check: () => Promise<boolean>) {
      isReady = check;
    },
    /** Reports a cache's bytes and entries (the routes' caches, each made once per app). */
    watchCache(name: CacheName, cache: WatchedCache) {
      caches.set(name, cache);
    },
    /** Answered requests and their durations, by operation (request-metrics.ts). */
    requests: requestMetrics(registry, OPERATIONS),
    rateLimited: startedAtZero(
      new Counter({
        name: 'petstore_ratelimit_refusals_total',
        help: 'Requests refused with 429 rate_limited, by plan ("anonymous" for requests without a valid key).',
        labelNames: ['plan'] as const,
        registers: [registry],
      }),
      [...PLANS, 'anonymous'].map((plan) => ({ plan })),
    ),
    bans: startedAtZero(
      new Counter({
        name: 'petstore_bans_total',
        help: 'Temporary bans placed on keys for sending on after 429s, by plan.',
        labelNames: ['plan'] as const,
        registers: [registry],
      }),
      PLANS.map((plan) => ({ plan })),
    ),
    deprecatedCalls: startedAtZero(
      new Counter({
        name: 'petstore_deprecated_calls_total',
        help: 'Calls to the deprecated operation getPet (sunset 5 December 2030), by plan; the key id of each call is in its log line.',
        labelNames: ['operation', 'plan'] as const,
        registers: [registry],
      }),
      PLANS.map((plan) => ({ operation: 'getPet', plan })),
    ),
    ready: new Gauge({
      name: 'petstore_ready',
      ...PROCESS_WIDE,
      help: '1 when this instance would answer /readyz 200 (not draining, storage answers), else 0; checked at each scrape.',
      registers: [registry],
      async collect() {
        const ready = isReady === undefined ? Promise.resolve(false) : isReady().catch(() => false);
        readinessChecked = ready;
        this.set(Number(await ready));
      },
    }),
    pool: new Gauge({
      name: 'petstore_db_pool_connections',
      help: 'Database pool connections by state: total, idle, and requests waiting for one (PostgreSQL only).',
      labelNames: ['state'] as const,
      registers: [registry],
      async collect() {
        if (!poolStats) return;
        await readinessChecked;
        const stats = poolStats();
        this.set({ state: 'total' }, stats.total);
        this.set({ state: 'idle' }, stats.idle);
        this.set({ state: 'waiting' }, stats.waiting);
      },
    }),
    cacheBytes: new Gauge({
      name: 'petstore_cache_bytes',
      help:
        'Bytes of memory the entries of a cache hold, as the cache counts them against its budget (PAGE_CACHE_BYTES, ' +
        'PET_CACHE_BYTES): pages (full list pages), last_pages (compressed forms of last pages), pets (pets by id).',
      labelNames: ['cache'] as const,
      registers: [registry],
      collect() {
        for (const [name, cache] of caches) this.set({ cache: name }, cache.bytes);
      },
    }),
    cacheEntries: new Gauge({
      name: 'petstore_cache_entries',
      help: 'Entries a cache holds (see petstore_cache_bytes).',
      labelNames: ['cache'] as const,
      registers: [registry],
      collect() {
        for (const [name, cache] of caches) this.set({ cache: name }, cache.size);
      },
    }),
    connectionsRefused: startedAtZero(
      new Counter({
        name: 'petstore_connections_refused_total',
        help:
          'Connections closed as they arrived: beyond MAX_CONNECTIONS_PER_ADDRESS for their address ("address") ' +
          'or beyond MAX_CONNECTIONS ("total").',
        labelNames: ['reason'] as const,
        registers: [registry],
      }),
      [{ reason: 'address' }, { reason: 'total' }],
    ),
    keyLookups: new Counter({
      name: 'petstore_keys_looked_up_total',
      help:
        'API keys looked up in the store by their hash: keys this instance did not remember as found or unknown ' +
        '(KEY_CACHE_TTL_MS), one lookup however many requests wait for it.',
      registers: [registry],
    }),
    ...limiterMetrics(registry),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The limiter's own metrics: in each server's registry, and in the supervisor's when it decides for its workers (docs/workers.md). */
export function limiterMetrics(registry: Registry) {
  return {
    limiterFallbacks: new Counter({
      name: 'petstore_ratelimit_fallback_total',
      help: 'Rate-limit decisions taken by the in-memory fallback because Redis was unreachable.',
      registers: [registry],
    }),
    limiterPreadmitted: new Counter({
      name: 'petstore_ratelimit_preadmitted_total',
      help:
        'Requests admitted from a block of quota this instance took from Redis ahead, ' +
        'without a Redis call of their own (RATE_LIMIT_BLOCK_MAX).',
      registers: [registry],
    }),
    limiterDegraded: new Gauge({
      name: 'petstore_ratelimit_degraded',
      ...PROCESS_WIDE,
      help: '1 while the Redis limiter is unreachable and this instance limits in memory, else 0.',
      registers: [registry],
    }),
  };
}

/** What the limiter reports to. */
export type LimiterMetrics = ReturnType<typeof limiterMetrics>;
