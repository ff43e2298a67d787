/**
 * Graceful shutdown of a listening app, bounded by SHUTDOWN_TIMEOUT_MS from the signal:
 *  1. Drain (SHUTDOWN_DRAIN_MS) while still listening: /readyz answers 503. Without a proxy every
 *     answer ends its connection; behind one (TRUST_PROXY) connections stay alive (http/hooks/draining.ts).
 *  2. Stop listening: a new connection is refused, which a proxy retries on another instance even
 *     for a POST, since it sent nothing. Connections already open are kept, and every answer on them
 *     ends its connection. Behind a proxy an idle one is left for the proxy to close (at its own
 *     keep-alive timeout): the server closing it could cross a request the proxy is sending over it,
 *     which the proxy sees reset and cannot retry (a 502 for a POST).
 *  3. Once every connection has ended, storage (which flushes queued creates) and the limiter close.
 *     Connections still open CLOSE_RESERVE_MS before the bound are destroyed, so they close on time
 *     and the process exits 0: what that cuts was never fully received, or was already answered, or
 *     is a connection its client kept idle for the whole shutdown.
 */
import type { Server } from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { processSignals, type SignalSource } from './workers/signals.ts';

export interface ShutdownTimings {
  /** How long to keep listening after the signal, with /readyz reporting not ready. */
  drainMs: number;
  /** The whole shutdown, from the signal to closed storage. */
  timeoutMs: number;
  /**
   * Whether the clients are proxies (TRUST_PROXY is set): their idle connections are left for them to
   * close. Without one, idle connections close with the listener, as a client may keep one idle for
   * a minute and hold the shutdown to its bound.
   */
  proxied: boolean;
}

/** Kept at the end of the shutdown for storage and the limiter to close after connections are cut. */
export const CLOSE_RESERVE_MS = 1000;

export async function shutDownGracefully(app: FastifyInstance, timings: ShutdownTimings, signalledAt = performance.now()): Promise<void> {
  app.startDraining();
  // Direct clients move to new connections while the listener still takes them. A proxy would then
  // open one per request, and one still queued when the listener closes is reset after it was sent.
  if (!timings.proxied) app.closeConnectionsAfterAnswers();
  await sleep(timings.drainMs);
  const cutOffInMs = Math.max(0, signalledAt + timings.timeoutMs - CLOSE_RESERVE_MS - performance.now());
  const cutOff = setTimeout(() => cutRemainingConnections(app), cutOffInMs);
  try {
    app.closeConnectionsAfterAnswers();
    const stopped = stopListening(app.server);
    if (!timings.proxied) app.server.closeIdleConnections();
    await stopped;
    await app.close();
  } finally {
    clearTimeout(cutOff);
  }
}

/**
 * Closes the listener alone, resolving once every connection has ended. The HTTP server's own close()
 * would also close its idle connections at once (and stop enforcing its request timeouts).
 */
function stopListening(server: Server): Promise<void> {
  return new Promise((resolve) => net.Server.prototype.close.call(server, () => resolve()));
}

function cutRemainingConnections(app: FastifyInstance): void {
  // getConnections reads the count at once and reports it on the next tick, before the cut lands.
  app.server.getConnections((_err, count) => {
    app.log.warn({ connections: count }, 'shutdown: closing connections that did not end in time');
  });
  app.server.closeAllConnections();
}

/** Kept at the end of a shutdown, after the spans are flushed, to log and exit before the hard exit. */
const TRACING_FLUSH_RESERVE_MS = 200;

/**
 * On SIGTERM or SIGINT: the graceful shutdown, then the spans still queued within what is left of the
 * bound, then exit 0. Only storage or the limiter hanging on close reaches the hard exit (1).
 */
export function shutDownOnSignals(
  app: FastifyInstance,
  timings: ShutdownTimings,
  flushSpans?: (withinMs: number) => Promise<void>,
  signals: SignalSource = processSignals,
): void {
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    const signalledAt = performance.now();
    app.log.info({ signal, drainMs: timings.drainMs }, 'shutting down');
    const hardExit = setTimeout(() => {
      app.log.error('graceful shutdown timed out');
      process.exit(1);
    }, timings.timeoutMs);
    hardExit.unref();
    shutDownGracefully(app, timings, signalledAt).then(
      async () => {
        await flushSpans?.(Math.max(0, signalledAt + timings.timeoutMs - TRACING_FLUSH_RESERVE_MS - performance.now()));
        app.log.info({ ms: Math.round(performance.now() - signalledAt) }, 'shut down');
        process.exit(0);
      },
      (err: unknown) => {
        app.log.error({ err }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  signals.once('SIGTERM', shutdown);
  signals.once('SIGINT', shutdown);
}
