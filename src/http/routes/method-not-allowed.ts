/**
 * 405 with Allow for the other methods of known paths (Fastify alone would answer 404), and OPTIONS
 * answered 204 with the Allow list. Neither needs a key: both only restate the public OpenAPI
 * document. They are still rate-limited like everything under /v1. Hidden from the documented
 * operations; 405 is described once, as a component response.
 */
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.ts';

const PATHS: Record<string, string> = {
  '/v1/pets': 'GET, HEAD, POST, OPTIONS',
  '/v1/pets/:petId': 'GET, HEAD, OPTIONS',
  '/v1/openapi.json': 'GET, HEAD, OPTIONS',
};

const PATTERNS = Object.entries(PATHS).map(([url, allow]) => ({ pattern: new RegExp(`^${url.replace(/:\w+/g, '[^/]+')}$`), allow }));

/** The methods a known path supports, for methods the router has no routes for (PROPFIND, ...). */
function allowedAt(path: string): string | undefined {
  return PATTERNS.find(({ pattern }) => pattern.test(path))?.allow;
}

/** The 405 answer for a known path, or undefined for an unknown one. */
export function notAllowedError(method: string, path: string): ApiError | undefined {
  const allow = allowedAt(path);
  return allow === undefined
    ? undefined
    : new ApiError('method_not_allowed', `${method} is not allowed on this path; allowed: ${allow}`, undefined, { Allow: allow });
}

export async function methodNotAllowed(app: FastifyInstance): Promise<void> {
  // Every method the router knows (WebDAV's PROPFIND and SEARCH included), not only the common ones:
  // any of them on a known path is a 405 with Allow, never a 404.
  const methods = app.supportedMethods.filter((m) => m !== 'HEAD' && m !== 'CONNECT');
  for (const [url, allow] of Object.entries(PATHS)) {
    const allowed = allow.split(', ');
    app.route({
      method: methods.filter((m) => m === 'OPTIONS' || !allowed.includes(m)),
      // The table names whole paths; routes are registered under the API's prefix.
      url: url.slice(app.prefix.length),
      schema: { hide: true },
      config: { public: true },
      // Answered before any body is read: a DELETE with a body is a 405, not a 415 or 413.
      onRequest: async (request, reply) => {
        if (request.method === 'OPTIONS') return reply.header('Allow', allow).code(204).send();
        throw notAllowedError(request.method, url);
      },
      handler: async () => undefined,
    });
  }
}
