/**
 * 405 with Allow for the other methods of known paths (Fastify alone would answer 404), and OPTIONS
 * answered 204 with the Allow list. Neither needs a key: both only restate the public OpenAPI
 * document. They are still rate-limited like everything under /v1. Hidden from the documented
 * operations; 405 is described once, as a component response.
 */
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';

const PATHS: Record<string, string> = {
  '/v1/pets': 'GET, HEAD, POST, OPTIONS',
  '/v1/pets/:petId': 'GET, HEAD, OPTIONS',
  '/v1/openapi.json': 'GET, HEAD, OPTIONS',
};

const METHODS = ['DELETE', 'PATCH', 'POST', 'PUT', 'TRACE', 'OPTIONS'];

export async function methodNotAllowed(app: FastifyInstance): Promise<void> {
  for (const [url, allow] of Object.entries(PATHS)) {
    app.route({
      method: METHODS.filter((m) => m === 'OPTIONS' || !allow.includes(m)),
      url,
      schema: { hide: true },
      config: { public: true },
      // Answered before any body is read: a DELETE with a body is a 405, not a 415 or 413.
      onRequest: async (request, reply) => {
        reply.header('Allow', allow);
        if (request.method === 'OPTIONS') return reply.code(204).send();
        throw new ApiError('method_not_allowed', `${request.method} is not allowed on this path; allowed: ${allow}`);
      },
      handler: async () => undefined,
    });
  }
}
