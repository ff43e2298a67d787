/**
 * Configuration: one table of environment variables, parsed once at start and frozen. Each entry
 * holds the variable's name, its Config field, a TypeBox schema for its value, its default, the line
 * the README shows (`npm run docs:config` writes the README's table from here) and whether the HTTP
 * app reads it; the Config and AppConfig types, the validation and its messages all come from it. A
 * bad value throws a ConfigError whose one-line message names the variable; the CLI prints it and
 * exits 1. Only the CLI reads process.env; everything else receives a Config.
 */
import { resolve } from 'node:path';
import { ENVIRONMENTS } from './domain/api-key.ts';
import { proxyList, type ProxyTrust } from './domain/addresses.ts';
import { ConfigError, derived, pair, readTable, variable, type AppFieldOf, type ConfigOf, type Env, Schema } from './config/variable.ts';

import { DEFAULT_STATEMENT_TIMEOUT_MS, MIGRATION_MODES } from './storage/migration-mode.ts';
import { DEFAULT_MIGRATION_WAIT_MS } from './storage/migration-wait.ts';
import type { DatabaseTarget } from './storage/open.ts';

export { ConfigError } from './config/variable.ts';

/** Where the database is when DATABASE_URL is unset: its folder is created on first start. */
const DEFAULT_SQLITE_PATH = './data/petstore.db';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const HOST_NAME = /^[A-Za-z0-9.:-]+$/.source;

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

/** Every variable, in the README's order (a derived default's source comes before it). */
export const VARIABLES = [
  variable({
    env: 'PORT',
    field: 'port',
    schema: Schema.Integer({ minimum: 0, maximum: 65535 }),
    default: 8080,
    description: 'TCP port.',
    app: false,
  }),
  variable({
    env: 'HOST',
    field: 'host',
    schema: Schema.String({ pattern: HOST_NAME }),
    accepts: 'a host name or address',
    default: '127.0.0.1',
    description: 'Address to listen on (`0.0.0.0` for all interfaces).',
    app: false,
  }),
  variable({
    env: 'DATABASE_URL',
    field: 'database',
    schema: Schema.String({ pattern: /^(?:(?:sqlite|file):.+$|postgres(?:ql)?:\/\/.)/.source }),
    accepts: 'a URL starting with `sqlite:`, `file:`, `postgres://` or `postgresql://`',
    // The value may hold a password: never echo it.
    secret: true,
    default: `sqlite:${DEFAULT_SQLITE_PATH}`,
    description: '`sqlite:PATH` or `file:PATH`: a SQLite file; `postgres://` or `postgresql://`: PostgreSQL.',
    app: false,
    parse(raw): DatabaseTarget {
      const sqlite = /^(?:sqlite|file):(.+)$/.exec(raw);
      if (sqlite) {
        const path = sqlite[1]!.replace(/^\/\/(?=\/)/, '');
        return { engine: 'sqlite', path, createFolder: resolve(path) === resolve(DEFAULT_SQLITE_PATH) };
      }
      if (!URL.canParse(raw)) throw new ConfigError('DATABASE_URL is not a valid postgres:// URL');
      return { engine: 'postgres', url: raw };
    },
  }),
  variable({
    env: 'REDIS_URL',
    field: 'redisUrl',
    schema: Schema.String({ pattern: /^rediss?:\/\/./.source }),
    accepts: 'a URL starting with `redis://` or `rediss://`',
    secret: true,
    default: undefined,
    description: 'Rate-limit counters in Redis, shared by every instance. Unset: counters in process memory, for one instance.',
    app: false,
  }),
  variable({
    env: 'REDIS_CLUSTER_NODES',
    field: 'redisClusterNodes',
    schema: Schema.String({ pattern: /^\s*rediss?:\/\/[^,\s]+(?:\s*,\s*rediss?:\/\/[^,\s]+)*\s*$/.source }),
    accepts: 'comma-separated URLs starting with `redis://` or `rediss://`',
    secret: true,
    default: undefined,
    description:
      'Counters in a Redis Cluster instead, reached through these seed nodes (the rest are discovered); with `REDIS_URL` unset. ' +
      "A user and password in the URLs, and `rediss://`'s TLS, apply to every node.",
    app: false,
    parse(raw): readonly string[] | undefined {
      if (raw === undefined) return undefined;
      const nodes = raw.split(',').map((node) => node.trim());
      for (const node of nodes) if (!URL.canParse(node)) throw new ConfigError('REDIS_CLUSTER_NODES holds a URL that is not valid');
      return Object.freeze(nodes);
    },
  }),
  variable({
    env: 'REDIS_TLS_CA_FILE',
    field: 'redisTlsCaFile',
    schema: Schema.String(),
    accepts: 'the path of a PEM file',
    default: undefined,
    description: "Certificate authorities (PEM) trusted for `rediss://`, as managed Redis services hand them out. Unset: the system's.",
    app: false,
  }),
  variable({
    env: 'REDIS_KEY_PREFIX',
    field: 'redisKeyPrefix',
    schema: Schema.String({ pattern: /^[A-Za-z0-9_.:-]{1,64}$/.source }),
    accepts: '1 to 64 letters, digits or `_.:-`',
    default: 'petstore',
    description: "Namespace of this deployment's keys in Redis.",
    app: false,
  }),
  variable({
    env: 'RATE_LIMIT_BLOCK_MAX',
    field: 'rateLimitBlockMax',
    schema: Schema.Integer({ minimum: 1, maximum: 10_000 }),
    default: 100,
    description:
      'With Redis: the most requests of one busy key an instance admits from one Redis call (1: one call per request). ' +
      'Only keys whose every limit is at least a thousand times the block are pre-admitted; see Rate limiting in docs/decisions.md.',
    app: false,
  }),
  variable({
    env: 'PETSTORE_ENV',
    field: 'environment',
    schema: Schema.Enum(ENVIRONMENTS),
    default: 'production',
    description: 'A server accepts only keys of its own environment; staging runs the same code on its own database.',
    app: true,
  }),
  variable({
    env: 'LOG_LEVEL',
    field: 'logLevel',
    schema: Schema.Enum(LOG_LEVELS),
    default: 'info',
    description: 'Least severe level of the JSON lines logged on standard output.',
    app: true,
  }),
  variable({
    env: 'TRUST_PROXY',
    field: 'trustProxy',
    schema: Schema.String(),
    accepts: '`false`, a hop count or a comma-separated list of proxy addresses or CIDRs',
    default: 'false',
    description:
      "Whose `X-Forwarded-For` entries give the client's address: `false` (nobody's: the socket's address); a hop count, " +
      'the number of proxies in front (`1` behind one nginx: the entry it appends, the rightmost, is the client); or a ' +
      "comma-separated list of the proxies' addresses, CIDRs or `loopback`/`linklocal`/`uniquelocal` (entries are believed " +
      'from the right while they come from a listed proxy). `true` is refused: it would believe what the client writes. ' +
      'See "Behind a proxy".',
    app: true,
    parse(raw, refuse): ProxyTrust {
      if (raw === 'false' || raw === '0') return { kind: 'none' };
      // `true` would believe the leftmost X-Forwarded-For entry, which the client writes itself.
      if (raw === 'true') {
        throw new ConfigError(
          'TRUST_PROXY=true would believe any address a client writes in X-Forwarded-For; ' +
            'set the number of proxies in front (1 behind one nginx) or their addresses',
        );
      }
      if (/^[0-9]{1,2}$/.test(raw)) return { kind: 'hops', hops: Number(raw) };
      const proxies = proxyList(raw.split(',').map((e) => e.trim()));
      return proxies ? { kind: 'addresses', proxies } : refuse();
    },
  }),
  variable({
    env: 'PUBLIC_BASE_URL',
    field: 'publicBaseUrl',
    // An absolute http(s) URL or a path, ending in /v1, without query or fragment.
    schema: Schema.String({ pattern: /^(?:https?:\/\/[^/?#\s]+)?(?:\/[^/?#\s][^?#\s]*)?\/v1\/?$/.source }),
    accepts: 'an `http://` or `https://` URL, or a path starting with `/`, whose path ends in `/v1`',
    default: '/v1',
    description:
      "The API's base URL as clients reach it, e.g. `https://api.example.com/petstore/v1` behind a proxy that serves it under a " +
      "path prefix: the next page's `Link`, a created pet's `Location` and getPet's deprecation `Link` start with it. " +
      'See docs/api-document.md.',
    app: true,
    parse(raw, refuse): string {
      if (/^https?:/.test(raw) && !URL.canParse(raw)) refuse();
      return raw.replace(/\/$/, '');
    },
  }),
  variable({
    env: 'SQLITE_SYNCHRONOUS',
    field: 'sqliteSynchronous',
    schema: Schema.Enum(['normal', 'full'] as const),
    default: 'normal',
    description: '`full` flushes every commit to disk, so nothing acknowledged is lost even on power loss; see Durability.',
    app: false,
  }),
  variable({
    env: 'SQLITE_LOCK_WAIT_MS',
    field: 'sqliteLockWaitMs',
    schema: Schema.Integer({ minimum: 0, maximum: 60_000 }),
    default: 2000,
    description:
      'How long a SQLite write waits, off the event loop, for a lock another process holds before it is answered 503 with Retry-After.',
    app: false,
  }),
  variable({
    env: 'MIGRATION_LOCK_WAIT_MS',
    field: 'migrationLockWaitMs',
    schema: Schema.Integer({ minimum: 0, maximum: 3_600_000 }),
    default: DEFAULT_MIGRATION_WAIT_MS,
    description:
      'How long `petstore serve`, or a `petstore` command that opens the database, waits for the migration lock while another ' +
      "process holds it (another instance applying migrations, an operator's session; on SQLite the write lock) before it " +
      'exits with a message naming the lock (300000: 5 minutes; 0: no wait). The wait is logged once. ' +
      'See "Migrations" in docs/operations.md.',
    app: false,
  }),
  variable({
    env: 'MIGRATIONS',
    field: 'migrations',
    schema: Schema.Enum(MIGRATION_MODES),
    default: 'apply',
    description:
      'What `petstore serve` and the `keys` commands do with a database that lacks migrations of this release: `apply` them ' +
      '(under the migration lock), or `refuse` to start, with exit status 1 and one line naming its version, the version needed ' +
      'and `petstore migrate`, which applies them whatever this says. A database ahead of the release is opened either way. ' +
      'See "Rollout order" in docs/operations.md.',
    app: false,
  }),
  variable({
    env: 'MIGRATION_STATEMENT_TIMEOUT_MS',
    field: 'migrationStatementTimeoutMs',
    schema: Schema.Integer({ minimum: 0, maximum: 86_400_000 }),
    default: DEFAULT_STATEMENT_TIMEOUT_MS,
    description:
      "PostgreSQL: the bound on each migration statement, waiting for a table's lock included (300000: 5 minutes; 0: none), " +
      "in place of the 2 s of the service's own statements; past it the migration is rolled back and the start or " +
      '`petstore migrate` exits 1 naming this setting. SQLite has none: a migration holds the write lock and waits for nothing else.',
    app: false,
  }),
  variable({
    env: 'KEY_CACHE_TTL_MS',
    field: 'keyCacheTtlMs',
    schema: Schema.Integer({ minimum: 0, maximum: 5000 }),
    default: 2000,
    description: 'How long a looked-up key, or a key found not to exist, is reused from memory; bounds how late a revocation takes effect.',
    app: true,
  }),
  variable({
    env: 'ANONYMOUS_RATE_LIMIT_PER_MINUTE',
    field: 'anonymousPerMinute',
    schema: Schema.Integer({ minimum: 1, maximum: 1_000_000 }),
    default: 60,
    description: 'Per-address limit for requests without a valid key.',
    app: true,
  }),
  variable({
    env: 'DOCS_RATE_LIMIT_PER_MINUTE',
    field: 'docsPerMinute',
    schema: Schema.Integer({ minimum: 1, maximum: 1_000_000 }),
    default: 300,
    description:
      'Per-address limit for the documentation: `/docs`, its scripts, and `/v1/openapi.json` without a valid key. A bucket ' +
      "of its own, apart from `ANONYMOUS_RATE_LIMIT_PER_MINUTE`'s: a first view of the page costs four requests, a later " +
      'one one or two. See docs/rate-limits.md.',
    app: true,
  }),
  variable({
    env: 'BAN_THRESHOLD',
    field: 'banThreshold',
    schema: Schema.Integer({ minimum: 1, maximum: 1_000_000 }),
    default: 20,
    description: 'Refused (429) requests of one key within one minute window that earn a temporary ban.',
    app: true,
  }),
  variable({
    env: 'BAN_DURATION_SECONDS',
    field: 'banDurationSeconds',
    schema: Schema.Integer({ minimum: 1, maximum: 30 * 86_400 }),
    default: 900,
    description: 'Length of a temporary ban (900: 15 minutes; 30 days at most).',
    app: true,
  }),
  variable({
    env: 'BAN_GRACE_MS',
    field: 'banGraceMs',
    schema: Schema.Integer({ minimum: 0, maximum: 60_000 }),
    default: 1000,
    description:
      "Refusals that arrive within this long of a key's first refusal in the window that refused them never count toward a ban: " +
      'they were already in flight.',
    app: true,
  }),
  variable({
    env: 'PAGE_CACHE_BYTES',
    field: 'pageCacheBytes',
    schema: Schema.Integer({ minimum: 0, maximum: 2 ** 40 }),
    default: 24 * 1024 * 1024,
    description:
      'Bytes of memory (24 MiB) the full list pages kept serialised may hold, counted as the process holds them: bodies, ' +
      "compressed forms and each entry's fixed bytes (0 turns the cache off); least recently used first out. " +
      'See "Memory of the caches" in docs/decisions.md.',
    app: true,
  }),
  variable({
    env: 'PET_CACHE_BYTES',
    field: 'petCacheBytes',
    schema: Schema.Integer({ minimum: 0, maximum: 2 ** 40 }),
    default: 8 * 1024 * 1024,
    description:
      'Bytes of memory (8 MiB) the pets found by id and kept serialised may hold, counted as the process holds them ' +
      '(0 turns the cache off); least recently used first out.',
    app: true,
  }),
  variable({
    env: 'PAGE_CACHE_TTL_MS',
    field: 'pageCacheTtlMs',
    schema: Schema.Integer({ minimum: 0, maximum: 60_000 }),
    default: 1000,
    description:
      'On PostgreSQL, where a full page can still change for a moment, how long it is reused (0: never cached). ' +
      'SQLite pages are final and kept until evicted.',
    app: true,
  }),
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
  variable({
    env: 'METRICS_TOKEN',
    field: 'metricsToken',
    schema: Schema.String({ pattern: /^[\x21-\x7e]{16,256}$/.source }),
    accepts: '16 to 256 printable ASCII characters without spaces',
    secret: true,
    default: undefined,
    description:
      'When set, `/metrics` is served on the public listener to requests with `Authorization: Bearer <token>`. ' +
      'Unset: `/metrics` is a 404 there.',
    app: true,
  }),
  variable({
    env: 'METRICS_PORT',
    field: 'metricsPort',
    schema: Schema.Integer({ minimum: 1, maximum: 65535 }),
    default: undefined,
    description: 'When set, a second listener serves `GET /metrics` without a token, on `METRICS_HOST`.',
    app: false,
  }),
  variable({
    env: 'METRICS_HOST',
    field: 'metricsHost',
    schema: Schema.String({ pattern: HOST_NAME }),
    accepts: 'a host name or address',
    default: '127.0.0.1',
    description: 'Address of the metrics listener (a private interface, for a scraper on the same host or network).',
    app: false,
  }),
  variable({
    env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    field: 'otlpEndpoint',
    schema: Schema.String({ pattern: /^https?:\/\/./.source }),
    accepts: 'an `http://` or `https://` URL',
    // A collector's URL may carry credentials: never echo it.
    secret: true,
    default: undefined,
    description:
      'When set, every request is traced (OpenTelemetry) and its spans sent, in batches, to this OTLP/HTTP collector ' +
      '(`/v1/traces` is appended). Unset: tracing is off and not even loaded. The exporter reads the other standard ' +
      '`OTEL_EXPORTER_OTLP_*` variables (headers, timeout) itself; see Tracing in docs/operations.md.',
    app: false,
    parse(raw, refuse): string | undefined {
      if (raw !== undefined && !URL.canParse(raw)) refuse();
      return raw;
    },
  }),
  variable({
    env: 'OTEL_SERVICE_NAME',
    field: 'otelServiceName',
    schema: Schema.String({ pattern: /^[\x21-\x7e]{1,128}$/.source }),
    accepts: '1 to 128 printable ASCII characters without spaces',
    default: 'petstore',
    description: "The `service.name` of this instance's spans (with tracing on).",
    app: false,
  }),
  variable({
    env: 'CORS_ORIGINS',
    field: 'corsOrigins',
    schema: Schema.String(),
    accepts: '`*` or a comma-separated list of origins like `https://app.example.com`',
    default: undefined,
    description: 'Origins allowed to call the API from browsers. Unset: no CORS headers at all.',
    app: true,
    parse(raw, refuse): readonly string[] | '*' {
      if (raw === undefined || raw.trim() === '') return Object.freeze([]);
      if (raw.trim() === '*') return '*';
      const origins = raw.split(',').map((o) => o.trim());
      for (const origin of origins) {
        const url = URL.parse(origin);
        if (!url || !/^https?:$/.test(url.protocol) || url.origin !== origin) refuse(origin);
      }
      return Object.freeze(origins);
    },
  }),
  pair({
    env: ['TLS_CERT', 'TLS_KEY'],
    field: 'tls',
    schema: Schema.String(),
    accepts: 'paths of PEM files',
    default: undefined,
    description: 'Certificate and key: the server listens with HTTPS itself. Both or neither.',
    app: false,
    parse([certPath, keyPath]): { certPath: string; keyPath: string } | undefined {
      if (!certPath && !keyPath) return undefined;
      if (!certPath || !keyPath) throw new ConfigError('TLS_CERT and TLS_KEY must be set together (PEM files), or neither');
      return { certPath, keyPath };
    },
  }),
] as const;

export type Config = ConfigOf<typeof VARIABLES>;

/** The fields buildApp reads: the entries marked `app`. */
export type AppField = AppFieldOf<typeof VARIABLES>;

/** Every environment variable the configuration reads. */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze(VARIABLES.flatMap((v) => v.names));

/** Time a shutdown keeps after draining: a second for requests in flight, a second to close storage. */
const SHUTDOWN_AFTER_DRAIN_MS = 2000;

/** Checks across variables, each giving its refusal when broken. */
const RULES: readonly ((config: Config) => string | undefined)[] = [
  ({ redisUrl, redisClusterNodes }) =>
    redisUrl !== undefined && redisClusterNodes !== undefined
      ? 'REDIS_URL and REDIS_CLUSTER_NODES name two Redis deployments: set one (a single Redis, or the seed nodes of a cluster)'
      : undefined,
  // A CA file read for nothing is a sign of a URL left at redis:// by mistake: say so at start.
  (config) =>
    config.redisTlsCaFile !== undefined && !redisUrls(config)?.some((url) => url.startsWith('rediss://'))
      ? 'REDIS_TLS_CA_FILE is set, but no rediss:// URL is: use rediss:// in REDIS_URL or REDIS_CLUSTER_NODES, or unset it'
      : undefined,
  // Node refuses a headers timeout longer than the request timeout it is part of.
  ({ headersTimeoutMs, requestTimeoutMs }) =>
    headersTimeoutMs > requestTimeoutMs
      ? `HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${requestTimeoutMs})`
      : undefined,
  // The per-address cap must leave room for others under the total one: one address (or /64) can
  // then never hold every connection.
  ({ maxConnections, maxConnectionsPerAddress }) =>
    maxConnections > 0 && maxConnectionsPerAddress >= maxConnections
      ? `MAX_CONNECTIONS_PER_ADDRESS (${maxConnectionsPerAddress}) must be below MAX_CONNECTIONS (${maxConnections})`
      : undefined,
  ({ shutdownDrainMs, shutdownTimeoutMs }) =>
    shutdownDrainMs + SHUTDOWN_AFTER_DRAIN_MS > shutdownTimeoutMs
      ? `SHUTDOWN_DRAIN_MS (${shutdownDrainMs}) must be at least ${SHUTDOWN_AFTER_DRAIN_MS} less than ` +
        `SHUTDOWN_TIMEOUT_MS (${shutdownTimeoutMs})`
      : undefined,
];

/** The Redis limiter's target, from REDIS_URL or REDIS_CLUSTER_NODES; undefined for the in-memory limiter. */
export function redisUrls(config: Pick<Config, 'redisUrl' | 'redisClusterNodes'>): readonly string[] | undefined {
  return config.redisClusterNodes ?? (config.redisUrl === undefined ? undefined : [config.redisUrl]);
}

/** Variables that were replaced: set, they would be ignored without a word, so they are refused. */
const REPLACED: Readonly<Record<string, string>> = {
  PAGE_CACHE_SIZE: 'PAGE_CACHE_SIZE (a count of pages) was replaced by PAGE_CACHE_BYTES (a byte budget); unset it',
};

export function loadConfig(env: Env): Readonly<Config> {
  for (const [name, refusal] of Object.entries(REPLACED)) if (env[name]) throw new ConfigError(refusal);
  const config = readTable(VARIABLES, env);
  for (const rule of RULES) {
    const refusal = rule(config);
    if (refusal !== undefined) throw new ConfigError(refusal);
  }
  return Object.freeze(config);
}
