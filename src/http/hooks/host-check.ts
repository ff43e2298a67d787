/**
 * An HTTP/1.1 request must name its host exactly once (RFC 9112 §3.2). Node would answer one without
 * it with a bare 400 of its own, before any hook runs, and keeps the first of two; the check is made
 * here instead (node-server.ts turns Node's off), so the answer is in the Error shape, with a request
 * id, the baseline headers and the rate-limit headers of the client's address (it is refused before
 * any key is read, and charged to the address as the guard would charge a request without a key),
 * logged and counted.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { AddressLimits } from '../api/address-limits.ts';
import { ApiError } from '../contract/api-error.ts';

function hostProblem(request: FastifyRequest): ApiError | undefined {
  const raw = request.raw;
  if (raw.headers.host === undefined && raw.httpVersionMajor === 1 && raw.httpVersionMinor === 1) {
    return new ApiError('invalid_request', 'An HTTP/1.1 request must carry a Host header');
  }
  if (hostLines(raw.rawHeaders) > 1) return new ApiError('invalid_request', 'A request must carry one Host header, not several');
  return undefined;
}

function hostLines(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') count++;
  }
  return count;
}

/** After the baseline headers, which its refusal carries like every other answer. */
export const hostCheck = fp(
  async (app: FastifyInstance, { addressLimits }: { addressLimits: AddressLimits }) => {
    app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
      const problem = hostProblem(request);
      if (problem === undefined) return done();
      void addressLimits.charge(addressLimits.clientOf(request.raw)).then((limited) => {
        reply.headers(limited ?? {});
        done(problem);
      });
    });
  },
  { name: 'host-check', dependencies: ['security-headers'] },
);
