/**
 * Configuration: one table of environment variables, parsed once at start and frozen. A bad value
 * throws a ConfigError whose one-line message names the variable; the CLI prints it and exits 1.
 * Only the CLI reads process.env; everything else receives a Config.
 */
import { ENVIRONMENTS, type Environment } from './domain/api-key.ts';
import { proxyList, type ProxyTrust } from './http/client-address.ts';

export type DatabaseTarget = { engine: 'sqlite'; path: string } | { engine: 'postgres'; url: string };

export interface Config {
  port: number;
  host: string;
  database: DatabaseTarget;
  redisUrl: string | undefined;
  /** Namespace of this deployment's keys in Redis. */
  redisKeyPrefix: string;
  environment: Environment;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Whose X-Forwarded-For entries are believed: nobody's, a number of hops, or listed proxies. */
  trustProxy: ProxyTrust;
  sqliteSynchronous: 'normal' | 'full';
  /** How long an API key lookup may be served from memory; bounds how late a revocation takes effect. */
  keyCacheTtlMs: number;
  /** Per-minute limit for requests that carry no valid key, per client address. */
  anonymousPerMinute: number;
  /** Refused (429) requests of a key within one minute window that earn it a temporary ban. */
  banThreshold: number;
  banDurationSeconds: number;
  /** Refusals this soon after a key's first refusal never count toward a ban (requests in flight). */
  banGraceMs: number;
  /** Full list pages kept serialised in memory (0 turns the cache off). */
  pageCacheSize: number;
  /** How long a full page is reused on engines where it can still change for a moment (PostgreSQL); 0: never. */
  pageCacheTtlMs: number;
  /** Longest wait for a request's headers; slow or silent connections are closed with 408 after it. */
  headersTimeoutMs: number;
  /** Longest wait for a whole request (headers and body). */
  requestTimeoutMs: number;
  /** How long an idle kept-alive connection stays open; longer than the idle timeout of a proxy in front. */
  keepAliveTimeoutMs: number;
  /** Open connections beyond this are closed at once (0: no cap). */
  maxConnections: number;
  /** Open connections one address may hold (0: no cap); the trusted proxies are exempt. */
  maxConnectionsPerAddress: number;
  /** On SIGTERM, how long to keep serving with Connection: close before the listener closes. */
  shutdownDrainMs: number;
  /** Bound on the whole shutdown, signal to exit; connections still open a second before it are cut. */
  shutdownTimeoutMs: number;
  /** Certificate and key files for the built-in HTTPS listener (both or neither). */
  tls: { certPath: string; keyPath: string } | undefined;
  /** When set, /metrics is served on the public listener, to requests bearing this token. */
  metricsToken: string | undefined;
  /** When set, a second listener serves /metrics without a token on metricsHost. */
  metricsPort: number | undefined;
  metricsHost: string;
  /** Origins allowed to call the API from browsers (CORS); empty: no CORS headers at all. */
  corsOrigins: readonly string[] | '*';
}

export class ConfigError extends Error {}

type Env = Readonly<Record<string, string | undefined>>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^[0-9]+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return Number(raw);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

function database(raw: string | undefined): DatabaseTarget {
  if (raw === undefined || raw === '') return { engine: 'sqlite', path: './data/petstore.db' };
  const sqlite = /^(?:sqlite|file):(.+)$/.exec(raw);
  if (sqlite) return { engine: 'sqlite', path: sqlite[1]!.replace(/^\/\/(?=\/)/, '') };
  if (/^postgres(?:ql)?:\/\/./.test(raw)) {
    try {
      new URL(raw);
    } catch {
      throw new ConfigError('DATABASE_URL is not a valid postgres:// URL');
    }
    return { engine: 'postgres', url: raw };
  }
  // The value may hold a password: never echo it.
  throw new ConfigError('DATABASE_URL must start with sqlite:, file:, postgres:// or postgresql://');
}

function redisUrl(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!/^rediss?:\/\/./.test(raw)) throw new ConfigError('REDIS_URL must start with redis:// or rediss://');
  return raw;
}

function keyPrefix(raw: string | undefined): string {
  if (raw === undefined || raw === '') return 'petstore';
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(raw)) throw new ConfigError(`REDIS_KEY_PREFIX must be 1 to 64 letters, digits or _.:-, got "${raw}"`);
  return raw;
}

/**
 * TRUST_PROXY: false, a hop count or a list of the proxies' addresses (see client-address.ts). `true`
 * is refused: it would believe the leftmost X-Forwarded-For entry, which the client writes itself.
 */
function trustProxy(raw: string | undefined): ProxyTrust {
  if (raw === undefined || raw === '' || raw === 'false' || raw === '0') return { kind: 'none' };
  if (raw === 'true') {
    throw new ConfigError(
      'TRUST_PROXY=true would believe any address a client writes in X-Forwarded-For; set the number of proxies in front (1 behind one nginx) or their addresses',
    );
  }
  if (/^[0-9]{1,2}$/.test(raw)) return { kind: 'hops', hops: Number(raw) };
  const proxies = proxyList(raw.split(',').map((e) => e.trim()));
  if (proxies) return { kind: 'addresses', proxies };
  throw new ConfigError(`TRUST_PROXY must be false, a hop count or a comma-separated list of proxy addresses or CIDRs, got "${raw}"`);
}

function host(name: string, raw: string | undefined): string {
  if (raw === undefined || raw === '') return '127.0.0.1';
  if (!/^[A-Za-z0-9.:-]+$/.test(raw)) throw new ConfigError(`${name} must be a host name or address, got "${raw}"`);
  return raw;
}

/**
 * The per-address cap must leave room for others under the total one: one address (or /64) can then
 * never hold every connection. Its default, 256, is roomy enough for a big customer or a NAT; under a
 * small total cap it is a quarter of that cap.
 */
function connectionCaps(env: Env): { maxConnections: number; maxConnectionsPerAddress: number } {
  const maxConnections = integer(env, 'MAX_CONNECTIONS', 10_000, 0, 1_000_000);
  const perAddressDefault = maxConnections > 0 ? Math.min(256, Math.max(1, Math.floor(maxConnections / 4))) : 256;
  const maxConnectionsPerAddress = integer(env, 'MAX_CONNECTIONS_PER_ADDRESS', perAddressDefault, 0, 1_000_000);
  if (maxConnections > 0 && maxConnectionsPerAddress >= maxConnections) {
    throw new ConfigError(`MAX_CONNECTIONS_PER_ADDRESS (${maxConnectionsPerAddress}) must be below MAX_CONNECTIONS (${maxConnections})`);
  }
  return { maxConnections, maxConnectionsPerAddress };
}

export function loadConfig(env: Env): Readonly<Config> {
  return Object.freeze({
    port: integer(env, 'PORT', 8080, 0, 65535),
    host: host('HOST', env.HOST),
    database: database(env.DATABASE_URL),
    redisUrl: redisUrl(env.REDIS_URL),
    redisKeyPrefix: keyPrefix(env.REDIS_KEY_PREFIX),
    environment: oneOf(env, 'PETSTORE_ENV', ENVIRONMENTS, 'production'),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    trustProxy: trustProxy(env.TRUST_PROXY),
    sqliteSynchronous: oneOf(env, 'SQLITE_SYNCHRONOUS', ['normal', 'full'] as const, 'normal'),
    keyCacheTtlMs: integer(env, 'KEY_CACHE_TTL_MS', 2000, 0, 5000),
    anonymousPerMinute: integer(env, 'ANONYMOUS_RATE_LIMIT_PER_MINUTE', 60, 1, 1_000_000),
    banThreshold: integer(env, 'BAN_THRESHOLD', 20, 1, 1_000_000),
    banDurationSeconds: integer(env, 'BAN_DURATION_SECONDS', 900, 1, 30 * 86_400),
    banGraceMs: integer(env, 'BAN_GRACE_MS', 1000, 0, 60_000),
    pageCacheSize: integer(env, 'PAGE_CACHE_SIZE', 1000, 0, 1_000_000),
    pageCacheTtlMs: integer(env, 'PAGE_CACHE_TTL_MS', 1000, 0, 60_000),
    ...timeouts(env),
    // Longer than the usual proxy idle timeout (60 s), so the proxy, not the server, ends idle
    // connections and never sends a request on one the server is closing.
    keepAliveTimeoutMs: integer(env, 'KEEP_ALIVE_TIMEOUT_MS', 72_000, 1000, 600_000),
    ...connectionCaps(env),
    ...shutdownTimings(env),
    tls: tls(env.TLS_CERT, env.TLS_KEY),
    metricsToken: metricsToken(env.METRICS_TOKEN),
    metricsPort: env.METRICS_PORT ? integer(env, 'METRICS_PORT', 0, 1, 65535) : undefined,
    metricsHost: host('METRICS_HOST', env.METRICS_HOST),
    corsOrigins: corsOrigins(env.CORS_ORIGINS),
  });
}

function tls(cert: string | undefined, key: string | undefined): Config['tls'] {
  const certPath = cert || undefined;
  const keyPath = key || undefined;
  if (!certPath && !keyPath) return undefined;
  if (!certPath || !keyPath) throw new ConfigError('TLS_CERT and TLS_KEY must be set together (PEM files), or neither');
  return { certPath, keyPath };
}

function metricsToken(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!/^[\x21-\x7e]{16,256}$/.test(raw)) throw new ConfigError('METRICS_TOKEN must be 16 to 256 printable ASCII characters without spaces');
  return raw;
}

function corsOrigins(raw: string | undefined): readonly string[] | '*' {
  if (raw === undefined || raw.trim() === '') return [];
  if (raw.trim() === '*') return '*';
  const origins = raw.split(',').map((o) => o.trim());
  for (const origin of origins) {
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    if (!url || !/^https?:$/.test(url.protocol) || url.origin !== origin) {
      throw new ConfigError(`CORS_ORIGINS must be * or a comma-separated list of origins like https://app.example.com, got "${origin}"`);
    }
  }
  return Object.freeze(origins);
}

function timeouts(env: Env): { headersTimeoutMs: number; requestTimeoutMs: number } {
  const headersTimeoutMs = integer(env, 'HEADERS_TIMEOUT_MS', 10_000, 100, 300_000);
  const requestTimeoutMs = integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 100, 600_000);
  // Node refuses a headers timeout longer than the request timeout it is part of.
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(`HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${requestTimeoutMs})`);
  }
  return { headersTimeoutMs, requestTimeoutMs };
}

/** Time a shutdown keeps after draining: a second for requests in flight, a second to close storage. */
const SHUTDOWN_AFTER_DRAIN_MS = 2000;

function shutdownTimings(env: Env): { shutdownDrainMs: number; shutdownTimeoutMs: number } {
  const shutdownDrainMs = integer(env, 'SHUTDOWN_DRAIN_MS', 1000, 0, 60_000);
  const shutdownTimeoutMs = integer(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 2000, 120_000);
  if (shutdownDrainMs + SHUTDOWN_AFTER_DRAIN_MS > shutdownTimeoutMs) {
    throw new ConfigError(
      `SHUTDOWN_DRAIN_MS (${shutdownDrainMs}) must be at least ${SHUTDOWN_AFTER_DRAIN_MS} less than SHUTDOWN_TIMEOUT_MS (${shutdownTimeoutMs})`,
    );
  }
  return { shutdownDrainMs, shutdownTimeoutMs };
}
