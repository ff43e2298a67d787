/**
 * The API: every route under /v1, one encapsulated plugin, so a request is an API request by the route it
 * matched, never by the URL's text. Its hooks, in order: `Cache-Control: no-store`, the guard
 * (guarded-requests.ts), then `100 Continue` for an admitted request whose body will be read.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Clock } from '../../domain/clock.ts';
import type { CursorCodec } from '../../domain/cursor.ts';
import type { CacheName, WatchedCache } from '../../metrics.ts';
import { IdempotentCreates } from '../../services/idempotent-creates.ts';
import type { Store } from '../../storage/store.ts';
import { StorageUnavailableError } from '../../storage/errors.ts';
import type { Guard } from './guarded-requests.ts';
import { serveOpenApi } from '../site/openapi-document.ts';
import { continueAdmitted } from '../hooks/unread-bodies.ts';
import { createPet } from './create-pet.ts';
import { getPet } from './get-pet.ts';
import { listPets } from './list-pets.ts';
import { methodNotAllowed, RouteTable } from './method-not-allowed.ts';

export interface ApiOptions {
  store: Store;
  guard: Guard;
  cursors: CursorCodec;
  pageCacheBytes: number;
  pageCacheTtlMs: number;
  petCacheBytes: number;
  /** Told each cache the routes keep, for the metrics. */
  watchCache: (name: CacheName, cache: WatchedCache) => void;
  clock: Clock;
  /**
   * The API's base URL as clients reach it (PUBLIC_BASE_URL): `/v1` or an absolute URL or path ending
   * in /v1. The URLs the API sends (next page, created pet, replacement) start with it.
   */
  publicBaseUrl: string;
  /** Filled with the API's routes as they are registered, for whoever needs their methods. */
  routes: RouteTable;
}

/**
 * The root's hooks, decorations, parsers and handlers this scope inherits: each must be in place
 * before the scope is made, which Fastify checks against these names at start.
 */
const INHERITED = [
  'request-ids',
  'draining',
  'security-headers',
  'host-check',
  'unread-bodies',
  'client-address',
  'guarded-requests',
  'validation',
  'json-bodies',
  'error-handling',
  'observation',
];

export const api = fp(apiScope, { name: 'api', encapsulate: true, dependencies: INHERITED });

async function apiScope(app: FastifyInstance, options: ApiOptions): Promise<void> {
  const { store, guard, cursors, clock, publicBaseUrl, watchCache } = options;
  app.addHook('onRequest', (_request, reply, done) => {
    reply.header('Cache-Control', 'no-store');
    done();
  });
  app.addHook('onRequest', guard.api);
  app.addHook('preParsing', continueAdmitted);
  const { routes } = options;
  routes.watch(app);
  await app.register(listPets, {
    pets: store,
    cursors,
    pageCacheBytes: options.pageCacheBytes,
    pageCacheTtlMs: options.pageCacheTtlMs,
    watchCache,
    // Cached pages' lifetimes are lengths of time.
    now: () => clock.elapsed(),
    publicBaseUrl,
  });
  const creates = new IdempotentCreates({
    store,
    clock,
    // A storage fault the store already logged when it began is not repeated with a stack each minute.
    onPurgeError: (err) =>
      err instanceof StorageUnavailableError && err.logged
        ? app.log.warn({ reason: err.reason }, 'purging expired idempotency keys failed')
        : app.log.warn({ err }, 'purging expired idempotency keys failed'),
  });
  await app.register(createPet, { pets: store, creates, publicBaseUrl });
  await app.register(getPet, { pets: store, cacheBytes: options.petCacheBytes, watchCache, now: () => clock.now(), publicBaseUrl });
  serveOpenApi(app);
  // Last: it reads the routes above to answer every other method (405) and every other path (404).
  await app.register(methodNotAllowed, { routes });
}
