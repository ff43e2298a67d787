/**
 * Prometheus metrics (prom-client), one registry per app so tests and several apps in one process
 * never share counters.
 */
import { Counter, Gauge, Registry } from 'prom-client';

export function createMetrics() {
  const registry = new Registry();
  return {
    registry,
    limiterFallbacks: new Counter({
      name: 'petstore_ratelimit_fallback_total',
      help: 'Rate-limit decisions taken by the in-memory fallback because Redis was unreachable.',
      registers: [registry],
    }),
    limiterDegraded: new Gauge({
      name: 'petstore_ratelimit_degraded',
      help: '1 while the Redis limiter is unreachable and this instance limits in memory, else 0.',
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
