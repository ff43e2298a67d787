/**
 * Configuration (src/config.ts): How long a connection and a request may take, how many connections
 * are held, and how a shutdown drains them.
 */
import { derived, variable, Schema } from '../variable.ts';

const MAX_CONNECTIONS = variable({
  env: 'MAX_CONNECTIONS',
  field: 'maxConnections',
  schema: Schema.Integer({ minimum: 0, maximum: 1_000_000 }),
  default: 10_000,
  description:
    'Open connections beyond this are closed as they arrive (0: no cap), so partial requests cannot pile up without bound. ' +
    'Above 80 % of it, answers keep their connection alive for 2 s only.',
  app: true,
});

export const CONNECTION_VARIABLES = [
  variable({
    env: 'HEADERS_TIMEOUT_MS',
    field: 'headersTimeoutMs',
    schema: Schema.Integer({ minimum: 100, maximum: 300_000 }),
    default: 10_000,
    description: "A connection must deliver a request's headers within this; slow or silent ones are answered 408 and closed.",
    app: true,
  }),
  variable({
    env: 'REQUEST_TIMEOUT_MS',
    field: 'requestTimeoutMs',
    schema: Schema.Integer({ minimum: 100, maximum: 600_000 }),
    default: 30_000,
    description: 'A whole request (headers and body) must arrive within this, else 408 and close. At least `HEADERS_TIMEOUT_MS`.',
    app: true,
  }),
  variable({
    env: 'KEEP_ALIVE_TIMEOUT_MS',
    field: 'keepAliveTimeoutMs',
    schema: Schema.Integer({ minimum: 1000, maximum: 600_000 }),
    // Longer than the usual proxy idle timeout (60 s), so the proxy, not the server, ends idle
    // connections and never sends a request on one the server is closing.
    default: 72_000,
    description:
      'How long an idle kept-alive connection stays open. Keep it longer than the idle timeout of a proxy in front, so the ' +
      'proxy ends idle connections and never reuses one the server is closing; behind a proxy (`TRUST_PROXY`) that timeout ' +
      'must also stay below the shutdown wait (see `SHUTDOWN_TIMEOUT_MS` and "Restarts" in docs/operations.md).',
    app: true,
  }),
  MAX_CONNECTIONS,
  variable({
    env: 'MAX_CONNECTIONS_PER_ADDRESS',
    field: 'maxConnectionsPerAddress',
    schema: Schema.Integer({ minimum: 0, maximum: 1_000_000 }),
    // Roomy enough for a big customer or a NAT, yet under a small total cap a quarter of it, so one
    // address (or /64) never holds every connection.
    default: derived(MAX_CONNECTIONS, '`256` (a quarter of `MAX_CONNECTIONS` when that is below 1024)', (total) =>
      total > 0 ? Math.min(256, Math.max(1, Math.floor(total / 4))) : 256,
    ),
    description:
      'Open connections one client address (an IPv6 client: its /64) may hold; more are closed as they arrive, so one client ' +
      'cannot take every slot. Below `MAX_CONNECTIONS`; 0: no cap. Trusted proxies (`TRUST_PROXY`) are exempt.',
    app: true,
  }),
  variable({
    env: 'SHUTDOWN_DRAIN_MS',
    field: 'shutdownDrainMs',
    schema: Schema.Integer({ minimum: 0, maximum: 60_000 }),
    default: 1000,
    description:
      'On SIGTERM, how long the server keeps listening with `/readyz` 503 before it stops; answers end their connections ' +
      '(behind a proxy, `TRUST_PROXY`, only once it stops). See "Restarts" in docs/operations.md.',
    app: false,
  }),
  variable({
    env: 'SHUTDOWN_TIMEOUT_MS',
    field: 'shutdownTimeoutMs',
    schema: Schema.Integer({ minimum: 2000, maximum: 120_000 }),
    default: 10_000,
    description:
      'Bound on a shutdown, from SIGTERM to exit; at least `SHUTDOWN_DRAIN_MS` + 2000. A proxy closes its idle connections ' +
      'itself: keep its idle timeout below this less `SHUTDOWN_DRAIN_MS` less 1 s. Connections still open a second before it ' +
      'are cut so storage closes and the process exits 0; past it the process exits 1.',
    app: false,
  }),
] as const;
