/**
 * Request ids. A caller's own `X-Request-Id` is kept when it is safe to echo into headers and logs
 * (1 to 128 characters of letters, digits and `._:@+=/-`); anything else is replaced by a new UUID,
 * so a hostile value can neither forge log lines nor split headers. The id is returned on every
 * response, is a field of every log line and of every error body.
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
