/**
 * Connection fairness (docs/reliability.md): MAX_CONNECTIONS in all, MAX_CONNECTIONS_PER_ADDRESS per address
 * (trusted proxies exempt), and near the cap, connections going idle kept alive 2 s only. Connections already
 * idle keep their timer: Node counts a new connection that has not sent its request yet as idle too.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { MINUTE_MS, SECOND_MS } from '../../domain/durations.ts';
import type { Metrics } from '../../metrics.ts';
import { addressBucket, isListedProxy, normaliseAddress, type ProxyTrust } from '../../domain/addresses.ts';

export interface ConnectionCaps {
  /** Open connections in all (0: no cap). */
  maxConnections: number;
  /** Open connections per address or IPv6 /64 (0: no cap). */
  maxPerAddress: number;
  /** Whose connections are exempt from the per-address cap. */
  trust: ProxyTrust;
  keepAliveTimeoutMs: number;
}

/** Above this share of the total cap, connections are kept alive only briefly. */
const CROWDED = 0.8;
/** Below this share, connections are kept alive for the configured time again. */
const RELIEVED = 0.5;
/** The keep-alive timeout while crowded. */
const CROWDED_KEEP_ALIVE_MS = 2 * SECOND_MS;
const WARN_EVERY_MS = MINUTE_MS;

export function capConnections(server: Server, caps: ConnectionCaps, log: FastifyBaseLogger, metrics: Metrics): void {
  const lastWarnedAt = { address: 0, total: 0 };
  const refused = (reason: 'address' | 'total', fields: Record<string, unknown>) => {
    metrics.connectionsRefused.inc({ reason });
    const now = performance.now();
    if (now - lastWarnedAt[reason] < WARN_EVERY_MS) return;
    lastWarnedAt[reason] = now;
    log.warn({ reason, ...fields }, 'connections refused (counted in petstore_connections_refused_total; logged once a minute)');
  };

  if (caps.maxConnections > 0) {
    server.maxConnections = caps.maxConnections;
    server.on('drop', (data?: { remoteAddress?: string }) =>
      refused('total', { maxConnections: caps.maxConnections, client: data?.remoteAddress }),
    );
  }

  const perBucket = new Map<string, number>();
  const exempt = (address: string): boolean =>
    caps.trust.kind === 'hops' || (caps.trust.kind === 'addresses' && isListedProxy(caps.trust.proxies, address));
  let open = 0;
  let crowded = false;

  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress === undefined ? undefined : normaliseAddress(socket.remoteAddress);
    if (caps.maxPerAddress > 0 && address !== undefined && !exempt(address)) {
      const bucket = addressBucket(address);
      const held = perBucket.get(bucket) ?? 0;
      if (held >= caps.maxPerAddress) {
        socket.destroy();
        refused('address', { client: address, maxConnectionsPerAddress: caps.maxPerAddress });
        return;
      }
      perBucket.set(bucket, held + 1);
      socket.once('close', () => {
        const left = perBucket.get(bucket)! - 1;
        if (left === 0) perBucket.delete(bucket);
        else perBucket.set(bucket, left);
      });
    }
    if (caps.maxConnections === 0) return;
    open++;
    socket.once('close', () => {
      open--;
      if (crowded && open < caps.maxConnections * RELIEVED) {
        crowded = false;
        server.keepAliveTimeout = caps.keepAliveTimeoutMs;
      }
    });
    if (!crowded && open >= caps.maxConnections * CROWDED) {
      crowded = true;
      server.keepAliveTimeout = CROWDED_KEEP_ALIVE_MS;
      log.warn({ open, maxConnections: caps.maxConnections }, 'near the connection cap: keep-alive shortened');
    }
  });
}
