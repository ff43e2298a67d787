/**
 * An in-memory cache whose entries expire after a fixed time (KEY_CACHE_TTL_MS, for keys and bans). When full
 * it is emptied, not evicted entry by entry: it fills only under unusually many keys, each cheap to look up again.
 * Every `nowMs` is a reading of the elapsed clock (Clock.elapsed), so a wall clock stepped back cannot keep an
 * entry past its lifetime, nor one stepped forward drop it early.
 */
/** Entries a cache holds by default: the process's, which its workers divide (docs/workers.md). */
export const CACHE_ENTRIES = 10_000;

export class TtlCache<K, V> {
  readonly #entries = new Map<K, { value: V; expiresAtMs: number }>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;

  constructor(options: { ttlMs: number; maxEntries?: number }) {
    this.#ttlMs = options.ttlMs;
    this.#maxEntries = options.maxEntries ?? CACHE_ENTRIES;
  }

  /** The value, while it has not expired at nowMs. */
  get(key: K, nowMs: number): V | undefined {
    const entry = this.#entries.get(key);
    return entry && entry.expiresAtMs > nowMs ? entry.value : undefined;
  }

  set(key: K, value: V, nowMs: number): void {
    if (this.#entries.size >= this.#maxEntries && !this.#entries.has(key)) this.#entries.clear();
    this.#entries.set(key, { value, expiresAtMs: nowMs + this.#ttlMs });
  }

  delete(key: K): void {
    this.#entries.delete(key);
  }
}
