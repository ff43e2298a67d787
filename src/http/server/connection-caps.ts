/**
 * Connection fairness (docs/reliability.md): MAX_CONNECTIONS in all, MAX_CONNECTIONS_PER_ADDRESS per address
 * (trusted proxies exempt), and near the cap, connections going idle kept alive 2 s only. Connections already
 * idle keep their timer: Node counts a new connection that has not sent its request yet as idle too. The counts
 * are the process's: kept in a shared table every worker is handed (connectionTable), so the caps hold for the
 * process however many workers it runs.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { MINUTE_MS, SECOND_MS } from '../../domain/durations.ts';
import type { Metrics } from '../../metrics.ts';
import { addressBucket, isListedProxy, normaliseAddress, type ProxyTrust } from '../../domain/addresses.ts';
import { NEIGHBOURHOOD, SharedTable } from '../../limits/shared-table.ts';

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
/** The record of the process's total: a key no address bucket has. */
const TOTAL = '\u0000total';
/** Records when MAX_CONNECTIONS sets no bound on how many addresses can hold one. */
const UNCAPPED_RECORDS = 65_536;

/** The table of the process's open connections, in all and per address bucket, to hand to every worker. */
export function connectionTable(maxConnections: number): SharedTable {
  const records = Math.max(NEIGHBOURHOOD, (maxConnections > 0 ? maxConnections : UNCAPPED_RECORDS) + 1);
  return new SharedTable(SharedTable.allocate(records, 1));
}

/**
 * Adds one to the key's count unless it is at `max` (0: no cap); the count after, or -1 when refused.
 * A table without room (no cap on the total, and more addresses connected than it holds) counts nothing.
 */
function take(table: SharedTable, key: string, max: number): number {
  const record = table.acquire(key, true);
  try {
    if (record < 0) return 0;
    const held = table.values[record]!;
    if (max > 0 && held >= max) return -1;
    return (table.values[record] = held + 1);
  } finally {
    table.release();
  }
}

/** Takes one from the key's count, and its record once none is left; the count after. */
function give(table: SharedTable, key: string): number {
  const record = table.acquire(key, false);
  try {
    if (record < 0) return 0;
    const left = table.values[record]! - 1;
    if (left > 0) return (table.values[record] = left);
    table.remove();
    return 0;
  } finally {
    table.release();
  }
}

export function capConnections(
  server: Server,
  caps: ConnectionCaps,
  log: FastifyBaseLogger,
  metrics: Metrics,
  counts: SharedTable = connectionTable(caps.maxConnections),
): void {
  const lastWarnedAt = { address: 0, total: 0 };
  const refused = (reason: 'address' | 'total', fields: Record<string, unknown>) => {
    metrics.connectionsRefused.inc({ reason });
    const now = performance.now();
    if (now - lastWarnedAt[reason] < WARN_EVERY_MS) return;
    lastWarnedAt[reason] = now;
    log.warn({ reason, ...fields }, 'connections refused (counted in petstore_connections_refused_total; logged once a minute)');
  };

  const exempt = (address: string): boolean =>
    caps.trust.kind === 'hops' || (caps.trust.kind === 'addresses' && isListedProxy(caps.trust.proxies, address));
  let crowded = false;

  // What each of this server's sockets holds: its address bucket's count (when capped) and one of the total.
  const holding = new Map<Socket, { bucket: string | undefined; total: boolean }>();
  const giveBack = (socket: Socket): void => {
    const held = holding.get(socket);
    if (held === undefined) return;
    holding.delete(socket);
    if (held.bucket !== undefined) give(counts, held.bucket);
    if (!held.total) return;
    const left = give(counts, TOTAL);
    if (crowded && left < caps.maxConnections * RELIEVED) {
      crowded = false;
      server.keepAliveTimeout = caps.keepAliveTimeoutMs;
    }
  };
  /**
   * A socket ended (its client already sees it closed) holds its counts until its 'close' event, a turn of the
   * event loop later: at a cap, those are given back first, so a connection made just after one ended is not refused.
   */
  const takeOrSweep = (key: string, max: number): number => {
    const taken = take(counts, key, max);
    if (taken >= 0) return taken;
    for (const socket of holding.keys()) if (socket.destroyed) giveBack(socket);
    return take(counts, key, max);
  };

  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress === undefined ? undefined : normaliseAddress(socket.remoteAddress);
    let bucket: string | undefined;
    if (caps.maxPerAddress > 0 && address !== undefined && !exempt(address)) {
      bucket = addressBucket(address);
      if (takeOrSweep(bucket, caps.maxPerAddress) < 0) {
        socket.destroy();
        refused('address', { client: address, maxConnectionsPerAddress: caps.maxPerAddress });
        return;
      }
    }
    if (bucket === undefined && caps.maxConnections === 0) return;
    const held = { bucket, total: false };
    holding.set(socket, held);
    socket.once('close', () => giveBack(socket));
    if (caps.maxConnections === 0) return;
    const open = takeOrSweep(TOTAL, caps.maxConnections);
    if (open < 0) {
      socket.destroy(); // its close gives its address's count back
      refused('total', { maxConnections: caps.maxConnections, client: address });
      return;
    }
    held.total = true;
    if (!crowded && open >= caps.maxConnections * CROWDED) {
      crowded = true;
      server.keepAliveTimeout = CROWDED_KEEP_ALIVE_MS;
      log.warn({ open, maxConnections: caps.maxConnections }, 'near the connection cap: keep-alive shortened');
    }
  });
}
