/**
 * Host must appear exactly once (RFC 9112 §3.2). Checked here, not by Node (node-server.ts turns its check
 * off), so the 400 is in the Error shape with the usual headers, charged to the address, logged and counted.
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
