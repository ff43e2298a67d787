/**
 * `GET /` (and HEAD): a redirect to the documentation page, so that someone who opens the server's
 * address in a browser lands on something to read. Outside /v1 and without a key, like the probes;
 * the baseline headers are added by the plugins every answer goes through. 302 rather than 308: a
 * permanent redirect is kept by browsers without end, and the root may one day answer by itself.
 */
import type { FastifyInstance } from 'fastify';
import { DOCS_PATH } from '../urls.ts';

export async function root(app: FastifyInstance): Promise<void> {
  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect(DOCS_PATH, 302));
}
