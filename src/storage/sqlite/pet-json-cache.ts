/**
 * Pets' JSON text by id, as SQLite's json_object wrote it, for assembling list pages. Pets are never
 * updated or deleted, so a pet's text never goes stale: nothing expires, and the bound is all there
 * is. When full, the oldest entry goes first; a lookup does not reorder (a recency update on every
 * hit would cost more than it saves where a page holds up to 100 pets).
 *
 * Bounded by count: 10,000 pets are about 1.5 MB of text for ordinary names, and at most about 14 MB
 * (100 escaped control characters of name each, held as two-byte text); see docs/decisions.md.
 */
export class PetJsonCache {
  readonly #json = new Map<string, string>();
  readonly #capacity: number;

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** The pet's JSON, by its id in decimal. */
  get(id: string): string | undefined {
    return this.#json.get(id);
  }

  set(id: string, json: string): void {
    if (this.#capacity === 0 || this.#json.has(id)) return;
    if (this.#json.size >= this.#capacity) this.#json.delete(this.#json.keys().next().value!);
    this.#json.set(id, json);
  }
}
