/**
 * Pets' JSON text by id, as SQLite's json_object wrote it, for assembling list pages. Pets are never
 * updated or deleted, so a pet's text never goes stale: nothing expires, and the bound is all there
 * is. When full, the oldest entry goes first; a lookup does not reorder (a recency update on every
 * hit would cost more than it saves where a page holds up to 100 pets).
 *
 * Bounded by count and by bytes: 10,000 pets are about 1.5 MB of text for ordinary names, but up to
 * about 14 MB for names of escaped control characters held as two-byte text, where MAX_BYTES binds.
 */
import { stringBytes } from '../../domain/string-bytes.ts';

/** Bytes the texts, their ids and a Map slot each may hold in all. */
const MAX_BYTES = 8 * 1024 * 1024;
/** What an entry holds besides its id's and text's strings: its Map slot (at worst, a table just doubled). */
// Measured by bench/cache-entry-bytes.ts: heap bytes 1,024 more pets add after a full GC, less their strings (42-57).
export const PET_JSON_ENTRY_OVERHEAD_BYTES = 60;

/** The texts come from SQLite as V8 strings of their own: stringBytes counts them as V8 holds them. */
const bytesOf = (id: string, json: string) => PET_JSON_ENTRY_OVERHEAD_BYTES + stringBytes(id) + stringBytes(json);

export class PetJsonCache {
  readonly #json = new Map<string, string>();
  readonly #capacity: number;
  #bytes = 0;

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** The pet's JSON, by its id in decimal. */
  get(id: string): string | undefined {
    return this.#json.get(id);
  }

  /** Bytes the cache holds, as counted against MAX_BYTES. */
  get bytes(): number {
    return this.#bytes;
  }

  set(id: string, json: string): void {
    if (this.#capacity === 0 || this.#json.has(id)) return;
    this.#json.set(id, json);
    this.#bytes += bytesOf(id, json);
    while (this.#json.size > this.#capacity || this.#bytes > MAX_BYTES) {
      const [oldId, oldJson] = this.#json.entries().next().value!;
      this.#json.delete(oldId);
      this.#bytes -= bytesOf(oldId, oldJson);
    }
  }
}
