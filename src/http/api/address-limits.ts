/**
 * The client address's rate limit, for answers given before any key is read: those written before or
 * outside the router (unrouted-answers.ts) and CORS preflights (security-headers.ts). It is the bucket
 * the guard charges requests without a valid key to (guarded-requests.ts), whose subject and limit it names here.
 *
 * The limiter may have to ask Redis; an answer never waits for it longer than LIMITER_WAIT_MS (the
 * Redis limiter falls back to memory well before that), and goes without the headers past it rather
 * than not at all.
 */
import type { IncomingMessage } from 'node:http';
import { MINUTE_MS } from '../../domain/durations.ts';
import type { LimitDecision, RateLimiter, WindowLimit } from '../../limits/limiter.ts';
import { addressBucket, isListedProxy, type ProxyTrust } from '../../domain/addresses.ts';
import { clientOf } from '../hooks/client-address.ts';
import { rateLimitHeaders } from './rate-limit-headers.ts';

/** The longest an answer waits for the limiter's decision. */
export const LIMITER_WAIT_MS = 1000;

/** The limiter subject of a client address (its /64 for IPv6), as the guard names it. */
export function addressSubject(address: string): string {
  return `addr:${addressBucket(address)}`;
}

/** The one window of requests without a valid key (ANONYMOUS_RATE_LIMIT_PER_MINUTE). */
export function anonymousLimits(perMinute: number): WindowLimit[] {
  return [{ name: 'minute', limit: perMinute, windowMs: MINUTE_MS }];
}

export interface AddressLimits {
  /** A request's client as the guard knows it (X-Forwarded-For believed as TRUST_PROXY says). */
  clientOf(request: IncomingMessage): string;
  /** Counts a request against its client's address, when it has room; the bucket's headers. */
  charge(client: string): Promise<Record<string, string> | undefined>;
  /** The bucket's headers, counting nothing. */
  report(client: string): Promise<Record<string, string> | undefined>;
  /**
   * For a request whose headers could not be read, known only by its connection's peer: charged to
   * the peer, unless the peer is a trusted proxy. The client is then named in headers that were never
   * read, and charging the proxy would spend, for every client behind it, what one of them ran up: its
   * bucket is reported instead.
   */
  chargePeer(peer: string): Promise<Record<string, string> | undefined>;
}

export function addressLimits(limiter: RateLimiter, perMinute: number, trust: ProxyTrust): AddressLimits {
  const limits = anonymousLimits(perMinute);
  const isProxy = (peer: string): boolean => trust.kind === 'hops' || (trust.kind === 'addresses' && isListedProxy(trust.proxies, peer));

  const charge = (client: string) => {
    const subject = addressSubject(client);
    const now = limiter.consumeNow(subject, limits);
    return now ? Promise.resolve(rateLimitHeaders(now)) : headersWithin(limiter.consume(subject, limits));
  };
  const report = (client: string) => headersWithin(limiter.peek(addressSubject(client), limits));
  return {
    clientOf: (request) => clientOf(request, trust),
    charge,
    report,
    chargePeer: (peer) => (isProxy(peer) ? report(peer) : charge(peer)),
  };
}

/** The decision's headers, or undefined when it fails or takes longer than LIMITER_WAIT_MS. */
function headersWithin(decision: Promise<LimitDecision>): Promise<Record<string, string> | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), LIMITER_WAIT_MS)));
  return Promise.race([decision.then(rateLimitHeaders, () => undefined), late]).finally(() => clearTimeout(timer));
}
