/**
 * The positive int64 rule, for pet ids and category ids: an integer from 1 to 2^63 - 1, held as a
 * bigint so the whole range survives a round trip. Parsing, checking, the order of ids written in
 * decimal and the words a client is told all live here.
 */

export const INT64_MAX = 9223372036854775807n;

/** What a client is told when a value breaks the rule, after the field's name. */
export const POSITIVE_INT64_PROBLEM = `must be an integer from 1 to ${INT64_MAX}`;

export function isPositiveInt64(value: bigint): boolean {
  return value >= 1n && value <= INT64_MAX;
}

/** A positive int64 written in decimal digits (leading zeros allowed), exactly; undefined for anything else. */
export function parsePositiveInt64(text: string): bigint | undefined {
  if (!/^[0-9]{1,25}$/.test(text)) return undefined;
  const value = BigInt(text);
  return isPositiveInt64(value) ? value : undefined;
}

/**
 * Whether one positive int64 in canonical decimal (no leading zeros, as a database writes it) is less
 * than another, without making bigints: the shorter text is the smaller number.
 */
function decimalLess(a: string, b: string): boolean {
  return a.length < b.length || (a.length === b.length && a < b);
}

/** Canonical decimal ids in ascending order: the same array when it already is (one pass), else sorted in place. */
export function inDecimalOrder(ids: string[]): string[] {
  for (let i = 1; i < ids.length; i++) {
    if (!decimalLess(ids[i - 1]!, ids[i]!)) return ids.sort((a, b) => (decimalLess(a, b) ? -1 : decimalLess(b, a) ? 1 : 0));
  }
  return ids;
}
