/** What the shared limiter's metrics say, read from an in-process limiter's registry (src/metrics.ts). */
import type { Metrics } from '../../src/metrics.ts';

/** The value of a metric without labels (0 before it has one). */
const metricValue = async (metrics: Metrics, name: string) => (await metrics.registry.getSingleMetric(name)!.get()).values[0]?.value ?? 0;

/** 1 while the limiter decides in memory, 0 once Redis decides again. */
export const degraded = (metrics: Metrics) => metricValue(metrics, 'petstore_ratelimit_degraded');

/** Decisions taken in memory, without Redis: what proves a fallback ran, where its answers could have been Redis's. */
export const fallbacks = (metrics: Metrics) => metricValue(metrics, 'petstore_ratelimit_fallback_total');

/** Requests admitted from a block of quota taken ahead from Redis. */
export const preadmitted = (metrics: Metrics) => metricValue(metrics, 'petstore_ratelimit_preadmitted_total');
