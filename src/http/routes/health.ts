/** Liveness and readiness probes and Prometheus metrics, outside /v1 and without a key. */
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../../metrics.js';
import type { Store } from '../../storage/store.js';
import { ApiError } from '../errors.js';

export async function health(app: FastifyInstance, { store, metrics }: { store: Store; metrics: Metrics }): Promise<void> {
  const probe = { schema: { hide: true } };
  // Liveness: the process answers. It never touches storage, so an outage does not get us restarted.
  app.get('/healthz', probe, async () => ({ status: 'ok' }));
  // Readiness: storage answers (migrations ran before the server started listening).
  app.get('/readyz', probe, async () => {
    try {
      await store.ping();
    } catch {
      throw new ApiError('unavailable', 'Storage is not reachable', undefined, { 'Retry-After': '5' });
    }
    return { status: 'ready', storage: store.engine };
  });
  app.get('/metrics', probe, async (_request, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
}
