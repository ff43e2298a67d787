/**
 * Bytes V8 holds for a flat string: a 16-byte header (map, hash, length, on 64-bit builds without
 * pointer compression, which Node.js's are) and the characters, one byte each when none is above
 * U+00FF, else two each for the whole string, rounded up to 8. What the caches count a text as.
 */
const STRING_HEADER_BYTES = 16;

/** A character above U+00FF: V8 then keeps every character of the string in two bytes. */
const BEYOND_LATIN1 = /[\u0100-\uffff]/;

export function stringBytes(text: string): number {
  // All ASCII (UTF-8 as long as the text) is the common case; only other text needs the second look.
  const width = Buffer.byteLength(text) === text.length || !BEYOND_LATIN1.test(text) ? 1 : 2;
  return roundedTo8(STRING_HEADER_BYTES + width * text.length);
}

const roundedTo8 = (bytes: number) => Math.ceil(bytes / 8) * 8;
