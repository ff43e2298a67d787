/**
 * Configuration (src/config.ts): Where the service listens, what it stores in and counts with (the
 * database, Redis), which environment its keys belong to, its logs, the proxies it trusts and the
 * address it is reached at.
 */
import { resolve } from 'node:path';
import { usableCores } from '../../workers/cores.ts';
import { ENVIRONMENTS } from '../../domain/api-key.ts';
import { proxyList, type ProxyTrust } from '../../domain/addresses.ts';
import { ConfigError, variable, Schema } from '../variable.ts';
import type { DatabaseTarget } from '../../storage/open.ts';

/** Where the database is when DATABASE_URL is unset: its folder is created on first start. */
const DEFAULT_SQLITE_PATH = './data/petstore.db';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const HOST_NAME = /^[A-Za-z0-9.:-]+$/.source;

export const DEPLOYMENT_VARIABLES = [
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
    env: 'WORKERS',
    field: 'workers',
    schema: Schema.Integer({ minimum: 1, maximum: 256 }),
    default: { shown: 'the cores the process may use (its CPU affinity, within a cgroup CPU quota)', from: () => usableCores() },
    description:
      'Servers the process runs, each on its own thread and all on one port, with one rate limiter (with Redis, one ' +
      'instance toward it) and one set of connection caps for the process; 1 serves from one thread. See docs/workers.md.',
    app: false,
  }),
  variable({
    env: 'RATE_LIMIT_MEMORY_BYTES',
    field: 'rateLimitMemoryBytes',
    schema: Schema.Integer({ minimum: 1024 * 1024, maximum: 2 ** 32 }),
    default: 64 * 1024 * 1024,
    description:
      'Bytes the in-process rate limiter (and, with Redis, its fallback) may hold: about 360 a client counted, so 64 MiB ' +
      'counts some 180,000 keys and addresses at once, and memory is used only as clients are counted. A new client it has ' +
      'no room for is answered 503 with Retry-After until windows end: a live window is never forgotten to make room. ' +
      'See docs/rate-limits.md.',
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
] as const;
