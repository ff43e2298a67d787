/**
 * Answers kept serialised, least recently used first out: full list pages (body, tag, compressed forms
 * and Link header as first computed, served without a query), the last pages' compressed forms, and,
 * with the same class, found pets (get-pet.ts), which never change. Only a page that has a next page
 * is kept as final; the last page of a list (which grows) is always read fresh.
 *
 * Pets are never updated or deleted, and a new pet takes an id above every id a full page covers, so
 * a full page changes only where ids are committed out of order:
 * - SQLite serialises its writers, so a full page is final there and is kept until evicted.
 * - PostgreSQL hands out sequence values before commit, so for a moment a slower transaction can
 *   still fill a gap below a page's last id. A full page is kept there for `ttlMs` only: a reader sees
 *   such a late pet at most that much later than a reader who queried, which is the same kind of lag
 *   a client paging through already has (it may have passed that id before the pet committed).
 * Where pages expire, the expired ones at the least recently used end are dropped as new pages are kept.
 */
import { stringBytes } from '../../domain/string-bytes.ts';
import type { Representation } from './representation.ts';

export interface CachedPage extends Representation {
  link: string;
}

/** What the cache can measure: a representation and, on a list page, its Link. */
type Kept = Representation & { readonly link?: string };

interface Entry<V> {
  readonly value: V;
  bytes: number;
  readonly expiresAtMs: number;
}

/**
 * What an entry holds besides the bytes counted for its texts and buffers: its Map slot (at worst, a
 * table just doubled), the entry, value and `encoded` objects, and the structure of strings built by
 * concatenation. A list page's key holds the cursor as sent (a slice of the request's URL), and a full
 * page has a Link; a pet's key is its id.
 */
// Measured by bench/cache-entry-bytes.ts: heap + external bytes 1,024 more entries add after full GC, less those counted (391-407, 259-285)
export const PAGE_ENTRY_OVERHEAD_BYTES = 410;
export const PET_ENTRY_OVERHEAD_BYTES = 290;
/** What a Buffer holds besides its bytes: its two objects on the V8 heap, and outside it V8's record of it and the allocator's own. */
// Measured by bench/cache-entry-bytes.ts: RSS 100,000 more Buffers of 300 to 8,000 bytes add, less their bytes (333-364; 212 on the heap).
export const BUFFER_OVERHEAD_BYTES = 370;

/** A Buffer's whole backing memory, not the view: a slice of a larger buffer keeps all of it alive. */
const bufferBytes = (bytes: Buffer) => bytes.buffer.byteLength + BUFFER_OVERHEAD_BYTES;

/** Bytes an entry holds: key, body (ASCII text, or UTF-8 bytes: keptBody), tag, Link, and each compressed form. */
function entryBytes(key: string, value: Kept, overhead: number): number {
  let bytes = overhead + stringBytes(key) + stringBytes(value.etag);
  bytes += typeof value.body === 'string' ? stringBytes(value.body) : bufferBytes(value.body);
  if (value.link !== undefined) bytes += stringBytes(value.link);
  for (const coded of [value.encoded.br, value.encoded.gzip]) if (coded) bytes += bufferBytes(coded);
  return bytes;
}

export interface PageCacheOptions {
  /** Bytes the entries may hold in all, as counted by entryBytes (0: keeps nothing). */
  maxBytes: number;
  /** The fixed bytes of an entry of this cache: PAGE_ENTRY_OVERHEAD_BYTES or PET_ENTRY_OVERHEAD_BYTES. */
  entryOverheadBytes: number;
  /** How long an entry is served after it was read; Infinity where entries are final. */
  ttlMs: number;
  now: () => number;
}

/** Bounded by the bytes its entries hold: beyond `maxBytes` the least recently used go first. */
export class PageCache<V extends Kept = CachedPage> {
  readonly #pages = new Map<string, Entry<V>>();
  #bytes = 0;

  readonly #maxBytes: number;
  readonly #entryOverheadBytes: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor({ maxBytes, entryOverheadBytes, ttlMs, now }: PageCacheOptions) {
    this.#maxBytes = maxBytes;
    this.#entryOverheadBytes = entryOverheadBytes;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  /** How many entries the cache holds, expired ones not yet dropped included. */
  get size(): number {
    return this.#pages.size;
  }

  /** Bytes the entries hold, expired ones not yet dropped included. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The cached answer: its `encoded` forms are shared with every later hit, so they are made once. */
  get(key: string): V | undefined {
    const page = this.#pages.get(key);
    if (page === undefined) return undefined;
    this.#pages.delete(key);
    if (page.expiresAtMs !== Infinity && page.expiresAtMs <= this.#now()) {
      this.#bytes -= page.bytes;
      return undefined; // final pages need no clock
    }
    // Map keeps insertion order: re-inserting marks the page as most recently used.
    this.#pages.set(key, page);
    return page.value;
  }

  /** Keeps the answer as the most recently used, unless it alone is larger than the whole budget. */
  set(key: string, value: V): void {
    if (this.#ttlMs <= 0 || this.#maxBytes <= 0) return; // a cache of nothing: no entry to measure
    const nowMs = this.#now();
    if (this.#ttlMs !== Infinity) this.#dropExpired(nowMs);
    this.#delete(key);
    const bytes = entryBytes(key, value, this.#entryOverheadBytes);
    if (bytes > this.#maxBytes) return;
    this.#pages.set(key, { value, bytes, expiresAtMs: nowMs + this.#ttlMs });
    this.#bytes += bytes;
    this.#evictBeyondBudget();
  }

  /**
   * Counts an entry again after a compressed form was added to it (sendRepresentation's onCompressed),
   * evicting the least recently used, or the entry itself when it no longer fits at all.
   */
  remeasure(key: string): void {
    const page = this.#pages.get(key);
    if (page === undefined) return;
    const bytes = entryBytes(key, page.value, this.#entryOverheadBytes);
    this.#bytes += bytes - page.bytes;
    page.bytes = bytes;
    if (bytes > this.#maxBytes) this.#delete(key);
    else this.#evictBeyondBudget();
  }

  #delete(key: string): void {
    const page = this.#pages.get(key);
    if (page === undefined) return;
    this.#pages.delete(key);
    this.#bytes -= page.bytes;
  }

  #evictBeyondBudget(): void {
    while (this.#bytes > this.#maxBytes) this.#delete(this.#pages.keys().next().value!);
  }

  /**
   * Drops the least recently used pages that have expired, up to the first that has not: a page no
   * one asks for again would otherwise be held until the cache is full. Each page is dropped once, so
   * keeping a page costs one look at the oldest page, plus the drops it makes.
   */
  #dropExpired(nowMs: number): void {
    for (const [key, page] of this.#pages) {
      if (page.expiresAtMs > nowMs) return;
      this.#delete(key);
    }
  }
}
