/**
 * Rate-limit response headers.
 * - X-RateLimit-Limit / -Remaining / -Reset describe the window nearest exhaustion: the lowest
 *   remaining count, a tie going to the longer window (the one that would keep a client waiting longer).
 *   Reset is Unix time in whole seconds.
 * - RateLimit-Policy and RateLimit (IETF httpapi draft) describe every window:
 *   RateLimit-Policy: "minute";q=60;w=60, "day";q=1000;w=86400
 *   RateLimit: "minute";r=59;t=41, "day";r=999;t=50441
 */
import type { FastifyReply } from 'fastify';
import { nearestExhaustion, type LimitDecision, type WindowLimit } from '../../limits/limiter.ts';

/** Whole seconds until a moment, never less than 1 while the moment is in the future. */
export function secondsUntil(atMs: number, nowMs: number): number {
  return Math.max(0, Math.ceil((atMs - nowMs) / 1000));
}

/** RateLimit-Policy depends on the limits alone: written once per limits array (a key's are made once per key record). */
const policies = new WeakMap<readonly WindowLimit[], string>();

function policyOf(limits: readonly WindowLimit[]): string {
  let policy = policies.get(limits);
  if (policy === undefined) {
    policy = limits.map((w) => `"${w.name}";q=${w.limit};w=${w.windowMs / 1000}`).join(', ');
    policies.set(limits, policy);
  }
  return policy;
}

/** The headers of a decision, counting from the moment it was taken. */
export function rateLimitHeaders(decision: LimitDecision): Record<string, string> {
  const nowMs = decision.nowMs;
  const shown = nearestExhaustion(decision.windows);
  return {
    'X-RateLimit-Limit': String(shown.limit),
    'X-RateLimit-Remaining': String(shown.remaining),
    'X-RateLimit-Reset': String(Math.ceil(shown.resetAtMs / 1000)),
    'RateLimit-Policy': policyOf(decision.limits),
    RateLimit: decision.windows.map((w) => `"${w.name}";r=${w.remaining};t=${secondsUntil(w.resetAtMs, nowMs)}`).join(', '),
  };
}

export function applyRateLimitHeaders(reply: FastifyReply, decision: LimitDecision): void {
  reply.headers(rateLimitHeaders(decision));
}
