/**
 * buildApp: the whole HTTP service from a configuration and its dependencies. It never listens and
 * never reads process.env, so tests build it with their own store, limiter and clock.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Socket } from 'node:net';
import type { AppField, Config } from './config.ts';
import { systemClock, type Clock } from './domain/clock.ts';
import { CursorCodec } from './domain/cursor.ts';
import { HashPrefixSet } from './domain/hash-prefix-set.ts';
import { KeyTags } from './domain/key-tags.ts';
import { KeyAuthenticator } from './http/api/key-authenticator.ts';
import { errorHandling } from './http/hooks/error-handling.ts';
import { unroutedAnswers } from './http/server/unrouted-answers.ts';
import { addressLimits } from './http/api/address-limits.ts';
import { draining } from './http/hooks/draining.ts';
import { hostCheck } from './http/hooks/host-check.ts';
import { requestIdOf, requestIds } from './http/hooks/request-ids.ts';
import { api } from './http/api/api.ts';
import { RouteTable } from './http/api/method-not-allowed.ts';
import { API_PREFIX } from './http/urls.ts';
import { clientAddress } from './http/hooks/client-address.ts';
import { capConnections } from './http/server/connection-caps.ts';
import { createGuard, guardedRequests } from './http/api/guarded-requests.ts';
import { unreadBodies } from './http/hooks/unread-bodies.ts';
import { createNodeServer, type TlsFiles } from './http/server/node-server.ts';
import { observation, unroutedRecorder } from './http/hooks/observation.ts';
import { securityHeaders } from './http/hooks/security-headers.ts';
import { BODY_LIMIT_BYTES, jsonBodies } from './http/hooks/json-bodies.ts';
import { docs } from './http/site/docs.ts';
import { health } from './http/site/health.ts';
import { root } from './http/site/root.ts';
import { validation } from './http/hooks/validation.ts';
import { KeyBans } from './limits/bans.ts';
import type { RateLimiter } from './limits/limiter.ts';
import type { SharedTable } from './limits/shared-table.ts';
import type { Exposition } from './workers/process-metrics.ts';
import type { Store } from './storage/store.ts';
import { createLogger, requestLogger } from './logger.ts';
import { createMetrics, type Metrics } from './metrics.ts';

export interface AppDeps {
  store: Store;
  limiter: RateLimiter;
  clock?: Clock;
  /** The JSON logger; one at config.logLevel on standard output when omitted. */
  logger?: FastifyBaseLogger;
  metrics?: Metrics;
  /** What the token route serves at /metrics: the whole process's, when it runs several workers; this app's registry by default. */
  exposition?: Exposition;
  /** Keys the key and ban caches hold at once: a worker's share of the process's CACHE_ENTRIES; all of them when omitted. */
  cacheEntries?: number;
  /** The process's open connections, shared by its workers (connection-caps.ts); this server's own when omitted. */
  connectionCounts?: SharedTable;
  /** Certificate and key for the built-in HTTPS listener; plain HTTP without them. */
  tls?: TlsFiles;
  /**
   * Collect the routes' schemas into the OpenAPI document (`app.swagger()`, src/http/contract/openapi.ts), for
   * `npm run openapi` and the test that compares it with the committed openapi.json. The server never
   * does: it serves that file.
   */
  describeRoutes?: boolean;
}

/** What buildApp reads of the configuration: the entries of its table marked `app` (src/config.ts). */
export type AppConfig = Pick<Config, AppField>;

export async function buildApp(config: AppConfig, deps: AppDeps): Promise<FastifyInstance> {
  const clock = deps.clock ?? systemClock;
  const metrics = deps.metrics ?? createMetrics();
  if (deps.store.poolStats) metrics.watchPool(() => deps.store.poolStats!());
  const logger = deps.logger ?? createLogger(config.logLevel);
  // The API's routes, filled as the API scope registers them; CORS preflights and answers given
  // outside the router read the methods from it.
  const routes = new RouteTable();
  const apiMethods = () => routes.union();
  // Answers given before any key is read (malformed requests, CORS preflights) carry the address's limit.
  const beforeKeys = addressLimits(deps.limiter, config.anonymousPerMinute, config.trustProxy);
  const unrouted = unroutedAnswers(unroutedRecorder(logger, metrics), apiMethods, beforeKeys);
  const app = Fastify({
    loggerInstance: logger,
    childLoggerFactory: requestLogger,
    // One line per request is written by the onResponse hook below instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    // The client's address is worked out by hooks/client-address.ts from TRUST_PROXY, not by Fastify.
    trustProxy: false,
    bodyLimit: BODY_LIMIT_BYTES,
    // While the server shuts down every request already received is served, never refused with 503
    // (which would fail requests a client had every reason to send). Which connections close when,
    // with and without a proxy in front: shutdown.ts.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    serverFactory: (handler) =>
      createNodeServer(handler, {
        headersTimeoutMs: config.headersTimeoutMs,
        requestTimeoutMs: config.requestTimeoutMs,
        keepAliveTimeoutMs: config.keepAliveTimeoutMs,
        tls: deps.tls,
      }),
    exposeHeadRoutes: true,
    // A path parameter of any length reaches its route, which answers a bad id with a 400 naming it
    // (and the rate-limit headers); the router's own limit (100) would give a bare framework error.
    // The request line is bounded anyway, by Node's header size limit.
    routerOptions: { maxParamLength: 16 * 1024 },
    clientErrorHandler: unrouted.clientError,
    requestIdHeader: false, // taken only when safe, by requestIdOf
    genReqId: requestIdOf,
    frameworkErrors: unrouted.frameworkError,
  }).withTypeProvider<TypeBoxTypeProvider>();

  capConnections(
    app.server,
    {
      maxConnections: config.maxConnections,
      maxPerAddress: config.maxConnectionsPerAddress,
      trust: config.trustProxy,
      keepAliveTimeoutMs: config.keepAliveTimeoutMs,
    },
    logger,
    metrics,
    deps.connectionCounts,
  );
  app.server.on('connect', (_request, socket) => unrouted.connect(socket as Socket));

  // What every answer shares, as named plugins: each states in its metadata the plugins it must
  // follow, and Fastify refuses to start when one is missing or out of order. Hooks run in the order
  // registered: the request id, the baseline headers (and CORS preflights), then the Host check; the
  // API's own hooks follow inside its scope (api.ts).
  await app.register(requestIds);
  await app.register(draining);
  await app.register(securityHeaders, { corsOrigins: config.corsOrigins, apiMethods, addressLimits: beforeKeys });
  await app.register(hostCheck, { addressLimits: beforeKeys });
  await app.register(unreadBodies);
  await app.register(clientAddress, { trust: config.trustProxy });
  await app.register(guardedRequests);
  await app.register(validation);
  await app.register(jsonBodies);
  await app.register(errorHandling);
  await app.register(observation, { metrics });

  const secret = await deps.store.cursorSecret();
  const guard = createGuard({
    authenticator: new KeyAuthenticator(deps.store, {
      environment: config.environment,
      cacheTtlMs: config.keyCacheTtlMs,
      cacheEntries: deps.cacheEntries,
      clock,
      tags: new KeyTags(secret),
      // Keys issued before tags are a closed set: read once, a new instance knows every one of them.
      untagged: new HashPrefixSet(await deps.store.untaggedKeyHashes(config.environment)),
      onLookup: () => metrics.keyLookups.inc(),
    }),
    limiter: deps.limiter,
    bans: new KeyBans(deps.store, deps.limiter, clock, {
      threshold: config.banThreshold,
      graceMs: config.banGraceMs,
      durationMs: config.banDurationSeconds * 1000,
      cacheTtlMs: config.keyCacheTtlMs,
      cacheEntries: deps.cacheEntries,
    }),
    anonymousPerMinute: config.anonymousPerMinute,
    docsPerMinute: config.docsPerMinute,
    metrics,
    clock,
  });
  if (deps.describeRoutes) await (await import('./http/contract/openapi.ts')).registerOpenApi(app, API_PREFIX);
  const cursors = new CursorCodec(secret);
  await app.register(api, {
    prefix: API_PREFIX,
    store: deps.store,
    guard,
    cursors,
    pageCacheBytes: config.pageCacheBytes,
    pageCacheTtlMs: config.pageCacheTtlMs,
    petCacheBytes: config.petCacheBytes,
    watchCache: metrics.watchCache,
    clock,
    publicBaseUrl: config.publicBaseUrl,
    routes,
  });
  await app.register(docs, { limit: guard.docs });
  await app.register(health, { store: deps.store, metrics, metricsToken: config.metricsToken, exposition: deps.exposition });
  await app.register(root);
  return app;
}
