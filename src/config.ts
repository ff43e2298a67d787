/**
 * Configuration: one table of environment variables, parsed once at start and frozen. A bad value
 * throws a ConfigError whose one-line message names the variable; the CLI prints it and exits 1.
 * Only the CLI reads process.env; everything else receives a Config.
 */
import { isIP } from 'node:net';
import { ENVIRONMENTS, type Environment } from './domain/api-key.ts';

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
  /** Whether X-Forwarded-For is believed (true, false, a hop count, or a list of proxy addresses). */
  trustProxy: boolean | number | string;
  sqliteSynchronous: 'normal' | 'full';
  /** How long an API key lookup may be served from memory; bounds how late a revocation takes effect. */
  keyCacheTtlMs: number;
  /** Per-minute limit for requests that carry no valid key, per client address. */
  anonymousPerMinute: number;
  /** Refused (429) requests of a key within one minute window that earn it a temporary ban. */
  banThreshold: number;
  banDurationSeconds: number;
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
  /** On SIGTERM, how long to keep serving with Connection: close before the listener closes. */
  shutdownDrainMs: number;
  /** Bound on the whole shutdown, signal to exit; connections still open a second before it are cut. */
  shutdownTimeoutMs: number;
  /** Certificate and key files for the built-in HTTPS listener (both or neither). */
  tls: { certPath: string; keyPath: string } | undefined;
  /** When set, /metrics answers only requests bearing this token. */
  metricsToken: string | undefined;
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

/** An address, a CIDR range, or one of proxy-addr's names for a range. */
function isProxyAddress(entry: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(entry)) return true;
  const [address = '', bits, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (bits === undefined) return true;
  return /^[0-9]{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}

function trustProxy(raw: string | undefined): boolean | number | string {
  if (raw === undefined || raw === '' || raw === 'false') return false;
  if (raw === 'true') return true;
  if (/^[0-9]{1,2}$/.test(raw)) return Number(raw);
  const entries = raw.split(',').map((e) => e.trim());
  if (entries.every(isProxyAddress)) return entries.join(',');
  throw new ConfigError(`TRUST_PROXY must be true, false, a hop count or a comma-separated list of addresses or CIDRs, got "${raw}"`);
}

function host(raw: string | undefined): string {
  if (raw === undefined || raw === '') return '127.0.0.1';
  if (!/^[A-Za-z0-9.:-]+$/.test(raw)) throw new ConfigError(`HOST must be a host name or address, got "${raw}"`);
  return raw;
}

export function loadConfig(env: Env): Readonly<Config> {
  return Object.freeze({
    port: integer(env, 'PORT', 8080, 0, 65535),
    host: host(env.HOST),
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
    pageCacheSize: integer(env, 'PAGE_CACHE_SIZE', 1000, 0, 1_000_000),
    pageCacheTtlMs: integer(env, 'PAGE_CACHE_TTL_MS', 1000, 0, 60_000),
    ...timeouts(env),
    // Longer than the usual proxy idle timeout (60 s), so the proxy, not the server, ends idle
    // connections and never sends a request on one the server is closing.
    keepAliveTimeoutMs: integer(env, 'KEEP_ALIVE_TIMEOUT_MS', 72_000, 1000, 600_000),
    maxConnections: integer(env, 'MAX_CONNECTIONS', 10_000, 0, 1_000_000),
    ...shutdownTimings(env),
    tls: tls(env.TLS_CERT, env.TLS_KEY),
    metricsToken: metricsToken(env.METRICS_TOKEN),
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
