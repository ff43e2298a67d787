/**
 * Configuration: one table of environment variables, parsed once at start and frozen. Each entry
 * holds the variable's name, its Config field, a JSON Schema for its value, its default, the line
 * the README shows (`npm run docs:config` writes the README's table from here) and whether the HTTP
 * app reads it; the Config and AppConfig types, the validation and its messages all come from it. A
 * bad value throws a ConfigError whose one-line message names the variable; the CLI prints it and
 * exits 1. Only the CLI reads process.env; everything else receives a Config.
 */
import { lookalikes, lookalikeWarning } from './config/lookalikes.ts';
import { ConfigError, readTable, type AppFieldOf, type ConfigOf, type Env } from './config/variable.ts';
import { CONNECTION_VARIABLES } from './config/variables/connections.ts';
import { DEPLOYMENT_VARIABLES } from './config/variables/deployment.ts';
import { EXPOSURE_VARIABLES } from './config/variables/exposure.ts';
import { LIMIT_VARIABLES } from './config/variables/limits.ts';
import { STORAGE_VARIABLES } from './config/variables/storage.ts';

export { ConfigError } from './config/variable.ts';

/** Every variable, in the README's order (a derived default's source comes before it), by concern in src/config/variables/. */
export const VARIABLES = [
  ...DEPLOYMENT_VARIABLES,
  ...STORAGE_VARIABLES,
  ...LIMIT_VARIABLES,
  ...CONNECTION_VARIABLES,
  ...EXPOSURE_VARIABLES,
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

/** A warning for each variable of env that looks like a setting but is not one, which the start logs (src/config/lookalikes.ts). */
export function lookalikeWarnings(env: Env): string[] {
  return lookalikes(env, [...CONFIG_VARIABLES, ...Object.keys(REPLACED)]).map(lookalikeWarning);
}
