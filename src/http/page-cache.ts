/**
 * Finished list pages, kept serialised. Pets are never updated or deleted and, on an engine whose
 * ids are committed in increasing order, nothing can ever appear before an id already seen: a page
 * that has a next page is final. Such pages are served from here, body and Link header as first
 * computed; the last page of a list (which grows) is never cached. Least recently used pages go
 * first once `capacity` is reached.
 */
export interface CachedPage {
  body: string;
  link: string;
}

export class PageCache {
  readonly #pages = new Map<string, CachedPage>();

  constructor(private readonly capacity: number) {}

  get(key: string): CachedPage | undefined {
    const page = this.#pages.get(key);
    if (page) {
      // Map keeps insertion order: re-inserting marks the page as most recently used.
      this.#pages.delete(key);
      this.#pages.set(key, page);
    }
    return page;
  }

  set(key: string, page: CachedPage): void {
    if (this.capacity === 0) return;
    this.#pages.delete(key);
    this.#pages.set(key, page);
    if (this.#pages.size > this.capacity) this.#pages.delete(this.#pages.keys().next().value!);
  }
}
