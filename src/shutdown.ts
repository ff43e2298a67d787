/**
 * Graceful shutdown of a listening app, bounded by SHUTDOWN_TIMEOUT_MS from the signal:
 *  1. Drain (SHUTDOWN_DRAIN_MS) while still listening: /readyz answers 503 and every answer ends its
 *     connection (`Connection: close`), so clients reconnect elsewhere instead of reusing a
 *     connection that is about to close (see http/draining.ts).
 *  2. Stop listening. Requests already received are served to the end; idle connections are closed.
 *  3. Connections still open CLOSE_RESERVE_MS before the bound are destroyed, so storage (which
 *     flushes queued creates) and the limiter close and the process exits 0 on time.
 *
 * Step 3 exists because Node stops enforcing the headers and request timeouts once the listener
 * closes: a client still trickling its request, or one that never reads its answer, would otherwise
 * hold the process until it is killed. What it cuts is a request the server never fully received, or
 * an answer already written, so nothing acknowledged is lost.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';

export interface ShutdownTimings {
  /** How long to keep listening with every answer closing its connection. */
  drainMs: number;
  /** The whole shutdown, from the signal to closed storage. */
  timeoutMs: number;
}

/** Kept at the end of the shutdown for storage and the limiter to close after connections are cut. */
export const CLOSE_RESERVE_MS = 1000;

export async function shutDownGracefully(app: FastifyInstance, timings: ShutdownTimings, signalledAt = Date.now()): Promise<void> {
  app.startDraining();
  // Draining marks answers in an onSend hook; answers written before any hook runs (framework errors
  // such as a malformed path) would keep their connection alive. Node's own flag, set before the
  // router sees the request, ends the connection after every answer whatever writes it.
  app.server.prependListener('request', endConnectionAfterAnswer);
  await sleep(timings.drainMs);
  const cutOffInMs = Math.max(0, signalledAt + timings.timeoutMs - CLOSE_RESERVE_MS - Date.now());
  const cutOff = setTimeout(() => cutRemainingConnections(app), cutOffInMs);
  try {
    await app.close();
  } finally {
    clearTimeout(cutOff);
  }
}

function endConnectionAfterAnswer(_request: IncomingMessage, response: ServerResponse): void {
  response.shouldKeepAlive = false;
}

function cutRemainingConnections(app: FastifyInstance): void {
  // getConnections reads the count at once and reports it on the next tick, before the cut lands.
  app.server.getConnections((_err, count) => {
    app.log.warn({ connections: count }, 'shutdown: closing connections whose requests did not finish in time');
  });
  app.server.closeAllConnections();
}
