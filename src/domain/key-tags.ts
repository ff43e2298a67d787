/**
 * API key tags: the last TAG_LENGTH characters of a key issued since tags are an HMAC of the characters
 * before them, under a key derived from the database's secret. Only a holder of that secret can make a tag
 * that passes, so a made-up key is refused on sight, without a lookup, and a key whose tag passes is worth
 * looking up whoever sends it (docs/rate-limits.md, "What a refusal costs").
 */
import { createHmac, createSecretKey, hkdfSync, timingSafeEqual, type KeyObject } from 'node:crypto';

/** 8 bytes of the HMAC-SHA-256: a made-up tag passes once in 2^64 tries. */
const TAG_BYTES = 8;

/** Characters of a tag: its 8 bytes in base64url, unpadded. */
export const TAG_LENGTH = 11;

/** What the tags' own key is derived for, so that a tag is never a cursor's MAC, though both come from one secret. */
const PURPOSE = 'petstore api key tags v1';

export class KeyTags {
  readonly #key: KeyObject;

  /** `secret`: the database's secret (Store.cursorSecret), so every process on that database makes and checks the same tags. */
  constructor(secret: string) {
    this.#key = createSecretKey(Buffer.from(hkdfSync('sha256', secret, '', PURPOSE, 32)));
  }

  /** The tag of a key's text before it: its environment's prefix and its random part. */
  tagOf(body: string): string {
    return createHmac('sha256', this.#key).update(body, 'latin1').digest().subarray(0, TAG_BYTES).toString('base64url');
  }

  /** Whether a tagged key's last TAG_LENGTH characters are the tag of the rest (compared in constant time). */
  verify(key: string): boolean {
    const given = Buffer.from(key.slice(-TAG_LENGTH), 'latin1');
    const expected = Buffer.from(this.tagOf(key.slice(0, -TAG_LENGTH)), 'latin1');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}
