/**
 * HMAC-SHA-256 (RFC 2104) under one key, built from node:crypto's one-shot digest.
 *
 * createHmac makes a native object on every call that the garbage collector must track and finalise.
 * A server that signs a cursor for every uncached page paid about 15 µs of CPU per request more for
 * that than for the two one-shot digests below (BENCHMARKS.md). The key's padded blocks are made
 * once; a property test in test/domain.test.ts checks every result against createHmac.
 */
import { hash } from 'node:crypto';

/** SHA-256's block size in bytes: the key is padded (or first hashed) to it. */
const BLOCK_BYTES = 64;

export type Mac = (message: Buffer) => Buffer;

export function hmacSha256(key: Buffer): Mac {
  const block = Buffer.alloc(BLOCK_BYTES);
  (key.length > BLOCK_BYTES ? hash('sha256', key, 'buffer') : key).copy(block);
  const innerPad = Buffer.alloc(BLOCK_BYTES);
  const outerPad = Buffer.alloc(BLOCK_BYTES);
  for (let i = 0; i < BLOCK_BYTES; i++) {
    innerPad[i] = block[i]! ^ 0x36;
    outerPad[i] = block[i]! ^ 0x5c;
  }
  return (message) => {
    const inner = hash('sha256', Buffer.concat([innerPad, message]), 'buffer');
    return hash('sha256', Buffer.concat([outerPad, inner]), 'buffer');
  };
}
