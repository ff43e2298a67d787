/**
 * buildApp: the whole HTTP service from a configuration and its dependencies. It never listens and
 * never reads process.env, so tests build it with their own store, limiter and clock.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Socket } from 'node:net';
import type { Config } from './config.ts';
import { CursorCodec } from './domain/cursor.ts';
import { KeyAuthenticator } from './http/authenticate.ts';
import { ApiError, installErrorHandling, sendError, unroutedAnswers } from './http/errors.ts';
import { installDraining } from './http/draining.ts';
import { REQUEST_ID_HEADER, requestIdOf } from './http/request-id.ts';
import { installGuard } from './http/guard.ts';
import { createNodeServer, type TlsFiles } from './http/node-server.ts';
import { installObservation, unroutedRecorder } from './http/observe.ts';
import { installSecurityHeaders } from './http/security-headers.ts';
import { installJsonBodyParser } from './http/json-body.ts';
import { registerOpenApi, serveOpenApi } from './http/openapi.ts';
import { createPet } from './http/routes/create-pet.ts';
import { docs } from './http/routes/docs.ts';
import { getPet } from './http/routes/get-pet.ts';
import { health } from './http/routes/health.ts';
import { listPets } from './http/routes/list-pets.ts';
import { methodNotAllowed, notAllowedError } from './http/routes/method-not-allowed.ts';
import { SHARED_SCHEMAS } from './http/schemas.ts';
import { installValidation } from './http/validation.ts';
import { KeyBans } from './limits/bans.ts';
import type { RateLimiter } from './limits/limiter.ts';
import type { Store } from './storage/store.ts';
import { createLogger } from './logger.ts';
import { createMetrics, type Metrics } from './metrics.ts';

export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export interface AppDeps {
  store: Store;
  limiter: RateLimiter;
  clock?: Clock;
  /** The JSON logger; one at config.logLevel on standard output when omitted. */
  logger?: FastifyBaseLogger;
  metrics?: Metrics;
  /** Certificate and key for the built-in HTTPS listener; plain HTTP without them. */
  tls?: TlsFiles;
}

export type AppConfig = Pick<
  Config,
  | 'environment'
  | 'logLevel'
  | 'trustProxy'
  | 'keyCacheTtlMs'
  | 'anonymousPerMinute'
  | 'banThreshold'
  | 'banDurationSeconds'
  | 'pageCacheSize'
  | 'pageCacheTtlMs'
  | 'headersTimeoutMs'
  | 'requestTimeoutMs'
  | 'keepAliveTimeoutMs'
  | 'maxConnections'
  | 'metricsToken'
  | 'corsOrigins'
>;

export const BODY_LIMIT_BYTES = 64 * 1024;

/**
 * Slow and abusive clients: a connection must deliver its headers within headersTimeoutMs and its
 * whole request within requestTimeoutMs (else 408 and close), and connections beyond maxConnections
 * are closed as they arrive, so partial requests cannot pile up without bound.
 */
function limitConnections(app: FastifyInstance, config: AppConfig, answerConnect: (socket: Socket) => void): void {
  if (config.maxConnections > 0) app.server.maxConnections = config.maxConnections;
  app.server.on('connect', (_request, socket) => answerConnect(socket as Socket));
}

export async function buildApp(config: AppConfig, deps: AppDeps): Promise<FastifyInstance> {
  const clock = deps.clock ?? systemClock;
  const metrics = deps.metrics ?? createMetrics();
  if (deps.store.poolStats) metrics.watchPool(() => deps.store.poolStats!());
  const now = () => clock.now();
  const logger = deps.logger ?? createLogger(config.logLevel);
  const unrouted = unroutedAnswers(unroutedRecorder(logger, metrics));
  const app = Fastify({
    loggerInstance: logger,
    // One line per request is written by the onResponse hook below instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    // A hop count is accepted at run time (proxy-addr) though the type leaves it out.
    trustProxy: config.trustProxy as FastifyServerOptions['trustProxy'],
    bodyLimit: BODY_LIMIT_BYTES,
    // What a client under load sees while the server shuts down: every request already received is
    // served, never refused with 503, and its answer carries `Connection: close` so the client
    // reconnects elsewhere; idle kept-alive connections are closed when the listener closes
    // ('idle'), after a drain during which every answer carried `Connection: close`. A 503 here
    // would fail requests a client had every reason to send. Order and bounds: shutdown.ts.
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

  limitConnections(app, config, unrouted.connect);
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id);
    done();
  });
  installDraining(app);
  installSecurityHeaders(app, config.corsOrigins);
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  installValidation(app);
  installJsonBodyParser(app);
  installErrorHandling(app);
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    return sendError(reply, notAllowedError(request.method, path) ?? new ApiError('not_found', `No resource at ${request.method} ${path}`));
  });
  installGuard(app, {
    authenticator: new KeyAuthenticator(deps.store, config.environment, config.keyCacheTtlMs, now),
    limiter: deps.limiter,
    bans: new KeyBans(deps.store, deps.limiter, {
      threshold: config.banThreshold,
      durationMs: config.banDurationSeconds * 1000,
      cacheTtlMs: config.keyCacheTtlMs,
    }),
    now,
    anonymousPerMinute: config.anonymousPerMinute,
    metrics,
  });
  installObservation(app, metrics);

  await registerOpenApi(app);
  const cursors = new CursorCodec(await deps.store.cursorSecret());
  await app.register(listPets, { pets: deps.store, cursors, pageCacheSize: config.pageCacheSize, pageCacheTtlMs: config.pageCacheTtlMs, now });
  await app.register(createPet, { pets: deps.store, now });
  await app.register(getPet, { pets: deps.store, now });
  await app.register(methodNotAllowed);
  await app.register(docs);
  await app.register(health, { store: deps.store, metrics, metricsToken: config.metricsToken });
  serveOpenApi(app);
  return app;
}
