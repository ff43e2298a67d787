/**
 * buildApp: the whole HTTP service from a configuration and its dependencies. It never listens and
 * never reads process.env, so tests build it with their own store, limiter and clock.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Config } from './config.js';
import { CursorCodec } from './domain/cursor.js';
import { KeyAuthenticator } from './http/authenticate.js';
import { answerClientError, answerFrameworkError, ApiError, installErrorHandling, sendError } from './http/errors.js';
import { installGuard } from './http/guard.js';
import { installJsonBodyParser } from './http/json-body.js';
import { registerOpenApi, serveOpenApi } from './http/openapi.js';
import { createPet } from './http/routes/create-pet.js';
import { getPet } from './http/routes/get-pet.js';
import { health } from './http/routes/health.js';
import { listPets } from './http/routes/list-pets.js';
import { methodNotAllowed } from './http/routes/method-not-allowed.js';
import { SHARED_SCHEMAS } from './http/schemas.js';
import { installValidation } from './http/validation.js';
import { KeyBans } from './limits/bans.js';
import type { RateLimiter } from './limits/limiter.js';
import type { Store } from './storage/store.js';
import { createLogger } from './logger.js';
import { createMetrics, type Metrics } from './metrics.js';

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
>;

export const BODY_LIMIT_BYTES = 64 * 1024;

/** Levels at which the one-line-per-request log is written; above them it costs nothing to build. */
const VERBOSE_LEVELS = new Set(['info', 'debug', 'trace']);

export async function buildApp(config: AppConfig, deps: AppDeps): Promise<FastifyInstance> {
  const clock = deps.clock ?? systemClock;
  const now = () => clock.now();
  const app = Fastify({
    loggerInstance: deps.logger ?? createLogger(config.logLevel),
    // One line per request is written by the onResponse hook below instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    // A hop count is accepted at run time (proxy-addr) though the type leaves it out.
    trustProxy: config.trustProxy as FastifyServerOptions['trustProxy'],
    bodyLimit: BODY_LIMIT_BYTES,
    return503OnClosing: true,
    exposeHeadRoutes: true,
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError,
  }).withTypeProvider<TypeBoxTypeProvider>();

  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  installValidation(app);
  installJsonBodyParser(app);
  installErrorHandling(app);
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new ApiError('not_found', `No resource at ${request.method} ${request.url.split('?')[0]}`)),
  );
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
  });
  app.addHook('onResponse', async (request, reply) => {
    if (!VERBOSE_LEVELS.has(request.log.level)) return;
    request.log.info(
      {
        method: request.method,
        route: request.routeOptions.url ?? null,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        keyId: request.apiKey?.id ?? null,
        client: request.ip,
      },
      'request',
    );
  });

  await registerOpenApi(app);
  const cursors = new CursorCodec(await deps.store.cursorSecret());
  await app.register(listPets, { pets: deps.store, cursors, pageCacheSize: config.pageCacheSize });
  await app.register(createPet, { pets: deps.store });
  await app.register(getPet, { pets: deps.store, now });
  await app.register(methodNotAllowed);
  await app.register(health, { store: deps.store, metrics: deps.metrics ?? createMetrics() });
  serveOpenApi(app);
  return app;
}
