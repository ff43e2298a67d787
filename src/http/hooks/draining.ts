/**
 * Draining before shutdown, in two steps that shutdown.ts takes. startDraining: /readyz answers 503
 * so a load balancer that polls it stops sending. closeConnectionsAfterAnswers: every answer from
 * then on carries `Connection: close`, so each connection still open ends after its next answer and
 * its client reconnects elsewhere. Behind a proxy the second step waits for the listener to close:
 * answers closing their connections would make the proxy open a new one for each request, and a
 * connection still waiting to be accepted when the listener closes is reset after the proxy sent
 * its request over it (a 502 for a POST, which it cannot retry).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** True once shutdown has begun. */
    readonly draining: boolean;
    /** Begins draining: /readyz reports not ready. */
    startDraining(): void;
    /** From now on every answer ends its connection. */
    closeConnectionsAfterAnswers(): void;
  }
}

export const draining = fp(
  async (app: FastifyInstance) => {
    let isDraining = false;
    let closingConnections = false;
    app.decorate('draining', {
      getter: () => isDraining,
    });
    app.decorate('startDraining', () => {
      isDraining = true;
    });
    app.decorate('closeConnectionsAfterAnswers', () => {
      if (closingConnections) return;
      closingConnections = true;
      // Node's own flag, set before the router sees a request, ends the connection after an answer
      // written before any hook runs (framework errors such as a malformed path).
      app.server.prependListener('request', endConnectionAfterAnswer);
    });
    // For requests already under way when the step begins. Synchronous: an async hook would defer
    // every answer to a later tick, draining or not.
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (closingConnections) reply.header('Connection', 'close');
      done(null, payload);
    });
  },
  { name: 'draining' },
);

function endConnectionAfterAnswer(_request: IncomingMessage, response: ServerResponse): void {
  response.shouldKeepAlive = false;
}
