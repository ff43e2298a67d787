/**
 * Request ids: a caller's `X-Request-Id` is kept when safe to echo (1 to 128 letters, digits and `._:@+=/-`),
 * else replaced by a UUID. Returned on every answer, and in every log line and error body.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

export const REQUEST_ID_HEADER = 'X-Request-Id';
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:@+=/-]{1,128}$/;

export function requestIdOf(request: IncomingMessage): string {
  const offered = request.headers['x-request-id'];
  return typeof offered === 'string' && SAFE_REQUEST_ID.test(offered) ? offered : randomUUID();
}

/** Puts the id on every answer, first of all the hooks, so even an answer a later hook ends early carries it. */
export const requestIds = fp(
  async (app: FastifyInstance) => {
    app.addHook('onRequest', (request, reply, done) => {
      reply.header(REQUEST_ID_HEADER, request.id);
      done();
    });
  },
  { name: 'request-ids' },
);
