/**
 * A set of SHA-256 hashes (lower-case hex) kept as their first 48 bits in one sorted array: 8 bytes a hash,
 * where a Set of the hex strings would hold about a hundred. `has` may say yes for a hash it was not given
 * (once in 2^48 / size), never no for one it was: a filter in front of a lookup, never an answer itself.
 */
export class HashPrefixSet {
  readonly #prefixes: Float64Array;

  constructor(hashes: readonly string[]) {
    this.#prefixes = Float64Array.from(hashes, prefixOf).sort();
  }

  get size(): number {
    return this.#prefixes.length;
  }

  has(hash: string): boolean {
    const wanted = prefixOf(hash);
    let low = 0;
    let high = this.#prefixes.length - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      const found = this.#prefixes[middle]!;
      if (found === wanted) return true;
      if (found < wanted) low = middle + 1;
      else high = middle - 1;
    }
    return false;
  }
}

/** The hash's first 12 hex digits (48 bits) as a number: exact in a double, which holds 53. */
const prefixOf = (hash: string): number => parseInt(hash.slice(0, 12), 16);
