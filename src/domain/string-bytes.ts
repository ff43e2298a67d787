/**
 * Bytes V8 holds for a string's characters: one each when all are ASCII (a one-byte string), else two
 * (an upper bound: a string of Latin-1 letters is one-byte too). What the caches count a text as.
 */
export function stringBytes(text: string): number {
  return Buffer.byteLength(text) === text.length ? text.length : 2 * text.length;
}
