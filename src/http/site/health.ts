/**
 * Liveness and readiness probes, outside /v1 and without a key; and Prometheus metrics on this
 * listener only when METRICS_TOKEN is set (otherwise they are served by the private metrics listener,
 * metrics-listener.ts, or not at all).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Metrics } from '../../metrics.ts';
import type { Store } from '../../storage/store.ts';
import { ApiError } from '../contract/api-error.ts';
import { readiness } from './readiness.ts';
import { registryExposition, type Exposition } from '../../workers/process-metrics.ts';

export interface HealthDeps {
  store: Store;
  metrics: Metrics;
  /** When set, /metrics is served here and needs `Authorization: Bearer <token>`. */
  metricsToken: string | undefined;
  /** What /metrics serves: the process's, when it runs several workers; this server's registry by default. */
  exposition?: Exposition;
}

/** Compares in constant time, so the token cannot be guessed a character at a time. */
function bearsToken(authorization: string | undefined, token: string): boolean {
  const expected = createHash('sha256').update(`Bearer ${token}`).digest();
  const offered = createHash('sha256')
    .update(authorization ?? '')
    .digest();
  return timingSafeEqual(expected, offered);
}

/** /readyz and the petstore_ready gauge read whether the server is draining. */
export const health = fp(probes, { name: 'health', encapsulate: true, dependencies: ['draining'] });

async function probes(
  app: FastifyInstance,
  { store, metrics, metricsToken, exposition = registryExposition(metrics.registry) }: HealthDeps,
): Promise<void> {
  const probe = { schema: { hide: true } };
  // Liveness: the process answers. It never touches storage, so an outage does not get us restarted.
  app.get('/healthz', probe, async () => ({ status: 'ok' }));
  // Readiness: storage answers (migrations ran before the server started listening), and on SQLite
  // takes writes again after they failed (ping tries one then; see docs/reliability.md). The
  // petstore_ready gauge runs the same check at each scrape.
  const check = () => readiness(app, store);
  metrics.watchReadiness(async () => (await check()).ready);
  app.get('/readyz', probe, async () => {
    const state = await check();
    if (state.ready) return { status: 'ready', storage: store.engine };
    const answer = new ApiError('unavailable', state.message, { headers: { 'Retry-After': '5' } });
    // Logged with the request when there is a cause the store has not logged already (once per change of state).
    answer.cause = state.cause;
    throw answer;
  });
  if (metricsToken === undefined) return;
  app.get('/metrics', probe, async (request, reply) => {
    reply.header('Cache-Control', 'no-store');
    if (!bearsToken(request.headers.authorization, metricsToken)) {
      throw new ApiError('unauthorized', 'The metrics need the token set by METRICS_TOKEN: Authorization: Bearer <token>', {
        headers: { 'WWW-Authenticate': 'Bearer realm="metrics"' },
      });
    }
    return reply.type(exposition.contentType).send(await exposition.text());
  });
}
