/**
 * What the operator sees of each request once it is answered: one JSON log line (method, route,
 * status, latency, key id, client address; the request id comes with the request's logger) and the
 * request metrics, including calls to the deprecated operation by plan.
 */
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Metrics } from '../../metrics.ts';
import type { UnroutedAnswerRecorder } from '../server/unrouted-answers.ts';

/** Levels at which the one-line-per-request log is written; above them it costs nothing to build. */
const VERBOSE_LEVELS = new Set(['info', 'debug', 'trace']);

/** The operation's id from the route schema; the route itself for probes; "unmatched" otherwise. */
export function operationOf(request: FastifyRequest): string {
  // routeOptions is a getter that builds a new object each time: read once.
  const { schema, url } = request.routeOptions;
  return (schema as { operationId?: string } | undefined)?.operationId ?? url ?? 'unmatched';
}

/** Reads the client's address and the guard's key fields, so it needs their declarations. */
export const observation = fp(
  async (app: FastifyInstance, { metrics }: { metrics: Metrics }) => {
    // Synchronous, like the other per-request hooks: no promise per answer.
    app.addHook('onResponse', (request, reply, done) => {
      const operation = operationOf(request);
      metrics.requests.record(operation, reply.statusCode, reply.elapsedTime / 1000);
      if (operation === 'getPet' && request.apiKey) metrics.deprecatedCalls.inc({ operation, plan: request.apiKey.plan });
      if (VERBOSE_LEVELS.has(request.log.level)) logAnswer(request, reply.statusCode, reply.elapsedTime);
      done();
    });
  },
  { name: 'observation', dependencies: ['client-address', 'guarded-requests'] },
);

function logAnswer(request: FastifyRequest, status: number, elapsedMs: number): void {
  request.log.info(
    {
      method: request.method,
      route: request.routeOptions.url ?? null,
      status,
      ms: Math.round(elapsedMs * 10) / 10,
      keyId: request.apiKey?.id ?? request.refusedKeyId ?? null,
      client: request.client,
    },
    'request',
  );
}

/**
 * The same log line and request count for answers written outside the router (a malformed request,
 * oversized headers, a timed-out request, CONNECT, a path that is not valid percent-encoding): the
 * operation is "unparsed", and there is no route or key.
 */
export function unroutedRecorder(log: FastifyBaseLogger, metrics: Metrics): UnroutedAnswerRecorder {
  return ({ requestId, method, status, client }) => {
    metrics.requests.record('unparsed', status);
    if (!VERBOSE_LEVELS.has(log.level)) return;
    log.info({ requestId, method, route: null, status, ms: null, keyId: null, client: client ?? null }, 'request');
  };
}
