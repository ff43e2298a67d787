/**
 * Configuration (src/config.ts): Rate limits that no key sets (anonymous callers, the documentation),
 * bans, and the caches in front of the store.
 */
import { variable, Schema } from '../variable.ts';

export const LIMIT_VARIABLES = [
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
] as const;
