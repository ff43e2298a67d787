/**
 * HMAC-SHA-256 (RFC 2104) under one key, for short messages of single-byte text such as a cursor's
 * payload, built from node:crypto's one-shot digest.
 *
 * Made for the request path. `createHmac` builds a native object on every call, and a digest handed
 * back as a Buffer brings its own native allocation; inside a busy server both cost more than the
 * digests themselves: the list that misses the page cache costs 9-14 % more with createHmac, on Node.js
 * 22, 24 and 26 alike (BENCHMARKS.md, "The CPU guard"). So the padded key sits in two buffers made once, the message is
 * written after the inner pad, the inner digest after the outer pad, and digests come back as latin1
 * text, one character per byte. A property test in test/units/domain.test.ts checks every result against
 * createHmac.
 */
import { hash } from 'node:crypto';

/** SHA-256's block size in bytes: the key is padded (or first hashed) to it. */
const BLOCK_BYTES = 64;
const DIGEST_BYTES = 32;
/** The longest message, in bytes (latin1 characters), that a MAC is made of. */
export const MAC_MESSAGE_MAX = 256;

/** The 32-byte MAC of a latin1 message (every character U+0000 to U+00FF), as latin1 text. */
export type Mac = (message: string) => string;

export function hmacSha256(key: Buffer): Mac {
  const block = Buffer.alloc(BLOCK_BYTES);
  (key.length > BLOCK_BYTES ? hash('sha256', key, 'buffer') : key).copy(block);
  const inner = Buffer.alloc(BLOCK_BYTES + MAC_MESSAGE_MAX);
  const outer = Buffer.alloc(BLOCK_BYTES + DIGEST_BYTES);
  for (let i = 0; i < BLOCK_BYTES; i++) {
    inner[i] = block[i]! ^ 0x36;
    outer[i] = block[i]! ^ 0x5c;
  }
  // Reusing the two buffers is safe: each MAC is made synchronously, start to end.
  return (message) => {
    if (message.length > MAC_MESSAGE_MAX) throw new RangeError(`A MAC is made of at most ${MAC_MESSAGE_MAX} bytes`);
    const length = inner.write(message, BLOCK_BYTES, 'latin1');
    outer.write(hash('sha256', inner.subarray(0, BLOCK_BYTES + length), 'latin1'), BLOCK_BYTES, 'latin1');
    return hash('sha256', outer, 'latin1');
  };
}
