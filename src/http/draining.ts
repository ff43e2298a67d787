/**
 * Draining before shutdown. On SIGTERM the server first drains for a moment while still listening:
 * /readyz answers 503 so a load balancer stops sending new traffic, and every response carries
 * `Connection: close` so each client's kept-alive connection ends after the answer it is waiting
 * for. Only then does the listener close, with every in-flight request finishing. Closing idle
 * connections at once instead would race with requests already on their way over them, and those
 * clients would see a reset for a request the server never read.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** True once shutdown has begun. */
    readonly draining: boolean;
    /** Begins draining: responses close their connections, /readyz reports not ready. */
    startDraining(): void;
  }
}

export const draining = fp(
  async (app: FastifyInstance) => {
    let isDraining = false;
    app.decorate('draining', {
      getter: () => isDraining,
    });
    app.decorate('startDraining', () => {
      isDraining = true;
    });
    // Synchronous: an async hook would defer every answer to a later tick, draining or not.
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (isDraining) reply.header('Connection', 'close');
      done(null, payload);
    });
  },
  { name: 'draining' },
);
