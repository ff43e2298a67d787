/**
 * Response headers fit for a JSON API, and CORS.
 *
 * Every answer: `X-Content-Type-Options: nosniff` (a JSON body is never run as script), a
 * Content-Security-Policy that allows nothing (`default-src 'none'; frame-ancestors 'none'`; the
 * documentation page sets its own) and `Referrer-Policy: no-referrer`. (`Cache-Control: no-store`, on
 * every answer that depends on the caller, is set by the API's own scope, api.ts, and by /metrics.)
 * Not @fastify/helmet: configured to these three it took 1.2-2.0 times the CPU per request on every
 * budget line it was measured on (it builds its middleware on each request, in an async hook;
 * BENCHMARKS.md), and answers written before any hook need the constants below anyway.
 *
 * CORS is off unless CORS_ORIGINS names origins (or `*`): browsers then get the usual headers, the
 * headers a client needs exposed, and preflights answered 204. Keys travel in `Authorization`, never
 * in cookies, so credentials are not allowed.
 *
 * A preflight carries the rate-limit headers of its client's address but is neither counted nor ever
 * refused: a refused preflight fails the browser's real request with an error its page cannot read,
 * and a browser sends one before every request it has not cached one for (docs/rate-limits.md).
 *
 * Not @fastify/cors: it answers every OPTIONS from an allowed origin as a preflight (a plain OPTIONS,
 * counted and refused here like any request, would get a 400 or a 204) and adds an `OPTIONS *` route
 * of its own beside the API's (method-not-allowed.ts); the preflight's rate-limit headers would stay here.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { AddressLimits } from '../api/address-limits.ts';

const ALLOWED_HEADERS = 'Authorization, Content-Type, Idempotency-Key, If-None-Match, X-Request-Id';
const EXPOSED_HEADERS = [
  'ETag',
  'Link',
  'Location',
  'Retry-After',
  'Deprecation',
  'Sunset',
  'X-Request-Id',
  'Idempotent-Replayed',
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit',
  'RateLimit-Policy',
].join(', ');
/** Carried by every answer, also by those written before any hook can run (see server/unrouted-answers.ts). */
export const BASELINE_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
} as const;
/** How long a browser may reuse a preflight answer, in seconds. */
const PREFLIGHT_MAX_AGE = '600';

/** The headers every answer carries; also called for answers written before any hook runs. */
export function applyBaselineHeaders(reply: FastifyReply): void {
  reply.headers(BASELINE_HEADERS);
}

export interface SecurityHeadersOptions {
  corsOrigins: readonly string[] | '*';
  /** Every method the API allows on some path (from its routes), for preflight answers. */
  apiMethods: () => string;
  /** Whose rate-limit headers a preflight carries: no key comes with one. */
  addressLimits: AddressLimits;
}

/** After the request id: a preflight answered here ends the request before any later hook runs. */
export const securityHeaders = fp(async (app: FastifyInstance, options: SecurityHeadersOptions) => installSecurityHeaders(app, options), {
  name: 'security-headers',
  dependencies: ['request-ids'],
});

function installSecurityHeaders(app: FastifyInstance, { corsOrigins, apiMethods, addressLimits }: SecurityHeadersOptions): void {
  const allowOrigin = (origin: string | undefined): string | undefined => {
    if (!origin) return undefined;
    if (corsOrigins === '*') return '*';
    return corsOrigins.includes(origin) ? origin : undefined;
  };

  const applyCors = (request: FastifyRequest, reply: FastifyReply): string | undefined => {
    const allowed = allowOrigin(request.headers.origin);
    if (corsOrigins !== '*' && corsOrigins.length > 0) reply.header('Vary', 'Origin');
    if (allowed) {
      reply.header('Access-Control-Allow-Origin', allowed);
      reply.header('Access-Control-Expose-Headers', EXPOSED_HEADERS);
    }
    return allowed;
  };

  // Set as the request arrives, so every answer, errors included, carries them (Fastify keeps a
  // reply's headers when an error answers it); a route that needs another policy (/docs) sets its own
  // over them. A synchronous hook: an async one here would defer every answer to a later tick.
  app.addHook('onRequest', (request, reply, done) => {
    applyBaselineHeaders(reply);
    const allowed = applyCors(request, reply);
    // A CORS preflight is answered before authentication: browsers never send credentials with it.
    // One from an origin that is not allowed gets the ordinary OPTIONS answer.
    if (allowed && request.method === 'OPTIONS' && request.headers['access-control-request-method']) {
      reply
        .header('Access-Control-Allow-Methods', apiMethods())
        .header('Access-Control-Allow-Headers', ALLOWED_HEADERS)
        .header('Access-Control-Max-Age', PREFLIGHT_MAX_AGE)
        .code(204);
      void addressLimits.report(addressLimits.clientOf(request.raw)).then((limited) => reply.headers(limited ?? {}).send());
      return;
    }
    done();
  });
}
