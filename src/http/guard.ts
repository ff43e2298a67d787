/**
 * The gate every /v1 request passes before its body is read: authentication, then rate limiting.
 * Running at onRequest means a refused request costs no body parsing, and every response under /v1,
 * errors included, carries the rate-limit headers of the subject that was charged: the API key when
 * it is valid, otherwise the client address (which also slows down key guessing).
 */
import type { FastifyInstance } from 'fastify';
import type { ApiKey } from '../domain/api-key.js';
import { DAY_MS, MINUTE_MS, type RateLimiter, type WindowLimit } from '../limits/limiter.js';
import type { KeyAuthenticator } from './authenticate.js';
import { ApiError } from './errors.js';
import { applyRateLimitHeaders, nearestExhaustion, secondsUntil } from './rate-limit-headers.js';

declare module 'fastify' {
  interface FastifyRequest {
    apiKey: ApiKey | undefined;
  }
  interface FastifyContextConfig {
    /** Served without a key (the key is still charged when a valid one is sent). */
    public?: boolean;
  }
}

export interface GuardOptions {
  authenticator: KeyAuthenticator;
  limiter: RateLimiter;
  now: () => number;
  anonymousPerMinute: number;
}

export function keyLimits(key: ApiKey): WindowLimit[] {
  return [
    { name: 'minute', limit: key.perMinute, windowMs: MINUTE_MS },
    { name: 'day', limit: key.perDay, windowMs: DAY_MS },
  ];
}

export function installGuard(app: FastifyInstance, options: GuardOptions): void {
  const anonymous: WindowLimit[] = [{ name: 'minute', limit: options.anonymousPerMinute, windowMs: MINUTE_MS }];
  app.decorateRequest('apiKey', undefined);

  app.addHook('onRequest', async (request, reply) => {
    if (!request.url.startsWith('/v1/') && request.url !== '/v1' && !request.url.startsWith('/v1?')) return;
    const auth = await options.authenticator.authenticate(request);
    const subject = auth.key ? `key:${auth.key.id}` : `addr:${request.ip}`;
    const nowMs = options.now();
    const decision = await options.limiter.consume(subject, auth.key ? keyLimits(auth.key) : anonymous, nowMs);
    applyRateLimitHeaders(reply, decision, nowMs);
    if (!decision.allowed) {
      const refusing = nearestExhaustion(decision.windows);
      const retryAfter = Math.max(1, secondsUntil(refusing.resetAtMs, nowMs));
      throw new ApiError(
        'rate_limited',
        `Rate limit of ${refusing.limit} requests per ${refusing.name} exceeded; retry after ${retryAfter} s`,
        undefined,
        { 'Retry-After': String(retryAfter) },
      );
    }
    if (auth.key) request.apiKey = auth.key;
    else if (!request.routeOptions.config.public) throw auth.failure;
  });
}
