/**
 * The gate every /v1 request passes at onRequest, before its body is read: authentication, bans, rate limits.
 * Every answer under /v1 carries the charged subject's headers (the key's, else the address's). A key whose
 * tag does not pass is refused without a lookup; one whose tag passes, or an untagged key known to exist, is
 * looked up whatever its address has spent; any other untagged key new to this instance only while its
 * address has room, or once a second (docs/rate-limits.md).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { ApiKey } from '../../domain/api-key.ts';
import type { Clock } from '../../domain/clock.ts';
import { BanNotStoredError, type KeyBans } from '../../limits/bans.ts';
import { DAY_MS, MINUTE_MS, SECOND_MS } from '../../domain/durations.ts';
import { TtlCache } from '../../domain/ttl-cache.ts';
import { nearestExhaustion, type LimitDecision, type RateLimiter, type WindowLimit } from '../../limits/limiter.ts';
import type { Metrics } from '../../metrics.ts';
import type { AuthResult, KeyAuthenticator } from './key-authenticator.ts';
import { addressSubject, anonymousLimits, docsSubject } from './address-limits.ts';
import { ApiError } from '../contract/api-error.ts';
import { applyRateLimitHeaders, secondsUntil } from './rate-limit-headers.ts';

declare module 'fastify' {
  interface FastifyRequest {
    apiKey: ApiKey | undefined;
    /** The id of a key that exists but was refused (revoked, expired, banned, over its limit), for the log. */
    refusedKeyId: string | undefined;
  }
  interface FastifyContextConfig {
    /** Served without a key (the key is still charged when a valid one is sent). */
    public?: boolean;
    /** Part of the documentation: without a valid key, charged to the address's documentation bucket. */
    docs?: boolean;
  }
}

export interface GuardOptions {
  authenticator: KeyAuthenticator;
  limiter: RateLimiter;
  bans: KeyBans;
  anonymousPerMinute: number;
  /** The documentation's own per-address limit (DOCS_RATE_LIMIT_PER_MINUTE). */
  docsPerMinute: number;
  metrics: Metrics;
  /** Its elapsed clock measures how long a spent address waits for its next lookup. */
  clock: Clock;
}

export function keyLimits(key: ApiKey): WindowLimit[] {
  return [
    { name: 'minute', limit: key.perMinute, windowMs: MINUTE_MS },
    { name: 'day', limit: key.perDay, windowMs: DAY_MS },
  ];
}

/** A key's limiter subject and limits, made once per key record (a changed key is read as a new record). */
interface KeyCharge {
  subject: string;
  limits: readonly WindowLimit[];
}
const charges = new WeakMap<ApiKey, KeyCharge>();

function chargeOf(key: ApiKey): KeyCharge {
  let charge = charges.get(key);
  if (charge === undefined) {
    charge = { subject: `key:${key.subjectId}`, limits: keyLimits(key) };
    charges.set(key, charge);
  }
  return charge;
}

function banned(untilMs: number, nowMs: number): ApiError {
  const retryAfter = Math.max(1, secondsUntil(untilMs, nowMs));
  return new ApiError(
    'key_banned',
    `This API key is temporarily banned for sending on after 429 responses; retry after ${retryAfter} s ` +
      `(${new Date(untilMs).toISOString()})`,
    { headers: { 'Retry-After': String(retryAfter) } },
  );
}

function rateLimited(decision: LimitDecision): ApiError {
  const refusing = nearestExhaustion(decision.windows);
  const retryAfter = Math.max(1, secondsUntil(refusing.resetAtMs, decision.nowMs));
  return new ApiError(
    'rate_limited',
    `Rate limit of ${refusing.limit} requests per ${refusing.name} exceeded; retry after ${retryAfter} s`,
    { headers: { 'Retry-After': String(retryAfter) } },
  );
}

/** While a key is banned every rate-limit header describes the ban: nothing left until it ends. */
function banWindows(limits: readonly WindowLimit[], bannedUntilMs: number, nowMs: number): LimitDecision {
  return { allowed: false, limits, nowMs, windows: limits.map((w) => ({ ...w, remaining: 0, resetAtMs: bannedUntilMs })) };
}

/** An onRequest hook that refuses by throwing an ApiError, having set the rate-limit headers. */
export type GuardHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/** A callback hook's continuation: with an error, the request is answered with it. */
type HookDone = (error?: Error) => void;

export interface Guard {
  /**
   * For every /v1 route: authentication, bans, then the key's or the address's rate limit. A callback
   * hook, which ends with done(error) where the others throw.
   */
  api: (request: FastifyRequest, reply: FastifyReply, done: HookDone) => void;
  /** For the documentation outside /v1 (the page, its scripts): the address's documentation bucket only. */
  docs: GuardHook;
}

export function createGuard(options: GuardOptions): Guard {
  const { authenticator, limiter, bans, metrics, clock } = options;
  const anonymous = anonymousLimits(options.anonymousPerMinute);
  const docs = anonymousLimits(options.docsPerMinute);
  /** Addresses past their limit that were let through to a store lookup within the last second. */
  const spentLookups = new TtlCache<string, true>({ ttlMs: SECOND_MS });

  /** Sets the ban's headers and names the key for the log; the error to answer with. */
  function refuseBanned(request: FastifyRequest, reply: FastifyReply, key: ApiKey, bannedUntil: number, nowMs: number): ApiError {
    applyRateLimitHeaders(reply, banWindows(chargeOf(key).limits, bannedUntil, nowMs));
    request.refusedKeyId = key.id;
    return banned(bannedUntil, nowMs);
  }

  /** Sets the decision's headers; true when the key is admitted. */
  function admit(request: FastifyRequest, reply: FastifyReply, key: ApiKey, decision: LimitDecision): boolean {
    applyRateLimitHeaders(reply, decision);
    if (decision.allowed) {
      request.apiKey = key;
      return true;
    }
    request.refusedKeyId = key.id;
    metrics.rateLimited.inc({ plan: key.plan });
    return false;
  }

  /** Counts a refusal toward a ban (which may place one), then throws the 429. */
  async function refuseOverLimit(request: FastifyRequest, key: ApiKey, decision: LimitDecision): Promise<never> {
    let banEnd: number | undefined;
    try {
      banEnd = await bans.recordRefusal(key.subjectId, decision);
    } catch (err) {
      // The refusal stands whatever became of the ban it earned: still the 429, not a 503.
      if (!(err instanceof BanNotStoredError)) throw err;
      metrics.bans.inc({ plan: key.plan });
      request.log.warn(
        { keyId: key.id, bannedUntil: new Date(err.bannedUntilMs).toISOString(), err: err.cause },
        'key banned on this instance only: the ban could not be stored',
      );
    }
    if (banEnd !== undefined) {
      metrics.bans.inc({ plan: key.plan });
      request.log.warn({ keyId: key.id, bannedUntil: new Date(banEnd).toISOString() }, 'key banned');
    }
    throw rateLimited(decision);
  }

  async function guardKey(request: FastifyRequest, reply: FastifyReply, key: ApiKey): Promise<void> {
    const nowMs = limiter.now();
    const bannedUntil = await bans.bannedUntil(key.subjectId, nowMs);
    if (bannedUntil !== undefined) throw refuseBanned(request, reply, key, bannedUntil, nowMs);
    const { subject, limits } = chargeOf(key);
    const decision = await limiter.consume(subject, limits);
    if (!admit(request, reply, key, decision)) await refuseOverLimit(request, key, decision);
  }

  /**
   * guardKey's outcome when nothing needs waiting for (ban state in memory, a limiter deciding from memory):
   * calls done and returns true; else returns false, having done nothing. The common request costs no promise.
   */
  function guardKeyNow(request: FastifyRequest, reply: FastifyReply, key: ApiKey, done: HookDone): boolean {
    const nowMs = limiter.now();
    const banEnd = bans.knownBanEnd(key.subjectId, nowMs);
    if (banEnd === undefined) return false;
    if (banEnd > nowMs) {
      done(refuseBanned(request, reply, key, banEnd, nowMs));
      return true;
    }
    const { subject, limits } = chargeOf(key);
    const decision = limiter.consumeNow(subject, limits);
    if (decision === undefined) return false;
    if (admit(request, reply, key, decision)) done();
    else refuseOverLimit(request, key, decision).catch(done);
    return true;
  }

  /** The whole guard, waiting for the store, the ban lookup or Redis where it must. */
  async function guardApi(request: FastifyRequest, reply: FastifyReply, known: AuthResult | undefined): Promise<void> {
    const auth = known ?? (await authenticateGuarded(request, reply));
    if (auth.key) return guardKey(request, reply, auth.key);
    request.refusedKeyId = auth.keyId;
    if (request.routeOptions.config.docs) await chargeDocs(request, reply);
    else await chargeAddress(request, reply);
    if (!request.routeOptions.config.public) throw auth.failure;
  }

  /** Charges the client's address (its /64 for IPv6); throws the 429 when it has no room left. */
  async function chargeAddress(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const decision = await limiter.consume(addressSubject(request.client), anonymous);
    applyRateLimitHeaders(reply, decision);
    if (!decision.allowed) throw refuseAddress(decision);
  }

  /** Charges the address's documentation bucket; throws the 429 when it has no room left. */
  async function chargeDocs(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const decision = await limiter.consume(docsSubject(request.client), docs);
    applyRateLimitHeaders(reply, decision);
    if (!decision.allowed) throw refuseAddress(decision);
  }

  function refuseAddress(decision: LimitDecision): ApiError {
    metrics.rateLimited.inc({ plan: 'anonymous' });
    return rateLimited(decision);
  }

  /**
   * authenticate, but an untagged key not known to exist is looked up only while the address has room, or
   * once a second; otherwise the address's 429, nothing counted (docs/rate-limits.md, "What a refusal
   * costs"). A tagged key never waits for the address: only keys that turn out invalid are charged to it.
   * The lookup starts or joins one without yielding, so requests for one key that looked together share it.
   */
  async function authenticateGuarded(request: FastifyRequest, reply: FastifyReply): Promise<AuthResult> {
    if (authenticator.lookupNeedsRoom(request)) {
      const subject = addressSubject(request.client);
      const decision = await limiter.peek(subject, anonymous);
      if (!decision.allowed && authenticator.lookupNeedsRoom(request)) {
        if (spentLookups.get(subject, clock.elapsed()) !== undefined) {
          applyRateLimitHeaders(reply, decision);
          throw refuseAddress(decision);
        }
        spentLookups.set(subject, true, clock.elapsed());
      }
    }
    return authenticator.authenticate(request);
  }

  return {
    api(request, reply, done) {
      const auth = authenticator.authenticateNow(request);
      if (auth?.key && guardKeyNow(request, reply, auth.key, done)) return;
      guardApi(request, reply, auth).then(() => done(), done);
    },
    docs: chargeDocs,
  };
}

/** The request fields the guard fills, declared once for the whole app: logs read them outside the API too. */
export const guardedRequests = fp(
  async (app: FastifyInstance) => {
    app.decorateRequest('apiKey', undefined);
    app.decorateRequest('refusedKeyId', undefined);
  },
  { name: 'guarded-requests' },
);
