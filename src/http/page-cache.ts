/**
 * Answers kept serialised, least recently used first out: full list pages (body, tag, compressed forms
 * and Link header as first computed, served without a query) and, with the same class, found pets
 * (get-pet.ts), which never change. Only a page that has a next page is kept; the last page of a list
 * (which grows) is always read fresh.
 *
 * Pets are never updated or deleted, and a new pet takes an id above every id a full page covers, so
 * a full page changes only where ids are committed out of order:
 * - SQLite serialises its writers, so a full page is final there and is kept until evicted.
 * - PostgreSQL hands out sequence values before commit, so for a moment a slower transaction can
 *   still fill a gap below a page's last id. A full page is kept there for `ttlMs` only: a reader sees
 *   such a late pet at most that much later than a reader who queried, which is the same kind of lag
 *   a client paging through already has (it may have passed that id before the pet committed).
 * Least recently used pages go first once `capacity` is reached; where pages expire, the expired ones
 * at that end are dropped as new pages are kept.
 */
import type { Representation } from './representation.ts';

export interface CachedPage extends Representation {
  link: string;
}

type Entry<V> = V & { expiresAtMs: number };

/**
 * Bounded by count. What an entry holds is bounded too: a page is at most 100 pets of at most 100
 * characters of name (about 70 KB of JSON at the very worst, 7 KB for ordinary names), and each
 * compressed form is no larger than the body plus a few bytes; see Listing in docs/decisions.md.
 */
export class PageCache<V extends object = CachedPage> {
  readonly #pages = new Map<string, Entry<V>>();

  readonly #capacity: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  /**
   * @param capacity pages kept at most (0: none)
   * @param ttlMs how long a page is served after it was read; Infinity where pages are final
   */
  constructor(capacity: number, ttlMs: number, now: () => number) {
    this.#capacity = capacity;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  /** How many pages the cache holds, expired ones not yet dropped included. */
  get size(): number {
    return this.#pages.size;
  }

  /** The cached answer: its `encoded` forms are shared with every later hit, so they are made once. */
  get(key: string): V | undefined {
    const page = this.#pages.get(key);
    if (page === undefined) return undefined;
    this.#pages.delete(key);
    if (page.expiresAtMs !== Infinity && page.expiresAtMs <= this.#now()) return undefined; // final pages need no clock
    // Map keeps insertion order: re-inserting marks the page as most recently used.
    this.#pages.set(key, page);
    return page;
  }

  set(key: string, page: V): void {
    if (this.#capacity === 0 || this.#ttlMs <= 0) return;
    const nowMs = this.#now();
    if (this.#ttlMs !== Infinity) this.#dropExpired(nowMs);
    this.#pages.delete(key);
    this.#pages.set(key, { ...page, expiresAtMs: nowMs + this.#ttlMs });
    if (this.#pages.size > this.#capacity) this.#pages.delete(this.#pages.keys().next().value!);
  }

  /**
   * Drops the least recently used pages that have expired, up to the first that has not: a page no
   * one asks for again would otherwise be held until the cache is full. Each page is dropped once, so
   * keeping a page costs one look at the oldest page, plus the drops it makes.
   */
  #dropExpired(nowMs: number): void {
    for (const [key, page] of this.#pages) {
      if (page.expiresAtMs > nowMs) return;
      this.#pages.delete(key);
    }
  }
}
