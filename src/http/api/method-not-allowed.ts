/**
 * 405 with `Allow` for the other methods of the API's paths, 204 with `Allow` for OPTIONS, 404 for any other
 * path under the prefix. `Allow` is read from the routes registered before, so it cannot disagree with the
 * router. No key needed (both restate the public document), but rate-limited like all of /v1.
 */
import type { FastifyInstance } from 'fastify';
import { ApiError, noResourceError } from '../contract/api-error.ts';
import { sendError } from '../hooks/error-handling.ts';

/** The order methods are listed in an `Allow` field. */
const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** The methods registered at each path of a scope (full paths, `:param` segments as registered). */
export class RouteTable {
  readonly #methods = new Map<string, Set<string>>();
  #sealed = false;
  #union: string | undefined;

  /** Records every route registered in `scope` (and the scopes under it) from now on, until sealed. */
  watch(scope: FastifyInstance): void {
    scope.addHook('onRoute', (route) => {
      if (this.#sealed) return;
      const methods = this.#methods.get(route.url) ?? new Set<string>();
      for (const method of [route.method].flat()) methods.add(method);
      this.#methods.set(route.url, methods);
    });
  }

  /** Stops recording (the 405 routes themselves are not part of what a path allows) and lists the paths. */
  seal(): { path: string; allow: string }[] {
    this.#sealed = true;
    this.#union = undefined;
    return [...this.#methods].map(([path, methods]) => ({ path, allow: allowField([...methods, 'OPTIONS']) }));
  }

  /** Every method some path allows, for CORS preflights and answers given outside the router; kept once listed, the table being sealed. */
  union(): string {
    return (this.#union ??= allowField([...this.#methods.values()].flatMap((m) => [...m]).concat('OPTIONS')));
  }
}

/** The methods as an `Allow` field lists them: the usual ones in a fixed order, others after them. */
export function allowField(methods: string[]): string {
  const known = METHOD_ORDER.filter((m) => methods.includes(m));
  const others = [...new Set(methods.filter((m) => !METHOD_ORDER.includes(m)))].sort();
  return [...known, ...others].join(', ');
}

export function methodNotAllowedError(method: string, allow: string): ApiError {
  return new ApiError('method_not_allowed', `${method} is not allowed on this path; allowed: ${allow}`, { headers: { Allow: allow } });
}

export interface MethodNotAllowedOptions {
  /** The scope's routes, registered before this plugin. */
  routes: RouteTable;
}

/**
 * Registered after every route of its scope: seals the table, adds the 405/OPTIONS routes, and sets
 * the scope's not-found answer (a 405 for a known path with a method the router has no routes for,
 * otherwise a 404).
 */
export async function methodNotAllowed(app: FastifyInstance, { routes }: MethodNotAllowedOptions): Promise<void> {
  const paths = routes.seal();
  // Every method the router knows (WebDAV's PROPFIND and SEARCH included), not only the common ones:
  // any of them on a known path is a 405 with Allow, never a 404.
  const methods = app.supportedMethods.filter((m) => m !== 'HEAD' && m !== 'CONNECT');
  for (const { path, allow } of paths) {
    const allowed = allow.split(', ');
    app.route({
      method: methods.filter((m) => m === 'OPTIONS' || !allowed.includes(m)),
      // The table holds whole paths; routes are registered under this scope's prefix.
      url: path.slice(app.prefix.length),
      // Out of the document: openapi.ts declares OPTIONS and the 405 on every documented path.
      schema: { hide: true },
      config: { public: true },
      // Answered before any body is read: a DELETE with a body is a 405, not a 415 or 413.
      onRequest: async (request, reply) => {
        if (request.method === 'OPTIONS') return reply.header('Allow', allow).code(204).send();
        throw methodNotAllowedError(request.method, allow);
      },
      handler: async () => undefined,
    });
  }
  const patterns = paths.map(({ path, allow }) => ({ pattern: new RegExp(`^${path.replace(/:\w+/g, '[^/]+')}$`), allow }));
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const allow = patterns.find(({ pattern }) => pattern.test(path))?.allow;
    return sendError(reply, allow ? methodNotAllowedError(request.method, allow) : noResourceError(request.method, request.url));
  });
}
