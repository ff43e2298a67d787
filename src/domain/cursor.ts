/**
 * Opaque keyset cursors: the page's last id and its status filter under an HMAC, so a forged or edited cursor
 * is a 400, never a different page. The secret is in the database, so every instance accepts every cursor.
 */
import { timingSafeEqual } from 'node:crypto';
import { hmacSha256, type Mac } from './hmac.ts';
import type { PetStatus } from './pet.ts';

const MAC_BYTES = 12;

/** No cursor this codec makes is longer: anything longer is refused unread. */
export const CURSOR_MAX_LENGTH = 200;

export interface CursorPosition {
  afterId: bigint;
  status: PetStatus | undefined;
}

export class CursorCodec {
  readonly #hmac: Mac;

  constructor(secret: string) {
    this.#hmac = hmacSha256(Buffer.from(secret, 'utf8'));
  }

  encode(position: CursorPosition): string {
    const payload = `${position.afterId}:${position.status ?? ''}`;
    return Buffer.from(payload + this.#mac(payload), 'latin1').toString('base64url');
  }

  /** The position a cursor stands for, or undefined when it is malformed or was altered. */
  decode(cursor: string): CursorPosition | undefined {
    if (cursor.length > CURSOR_MAX_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
    const raw = Buffer.from(cursor, 'base64url');
    if (raw.length <= MAC_BYTES || raw.toString('base64url') !== cursor) return undefined;
    const payload = raw.toString('latin1', 0, raw.length - MAC_BYTES);
    if (!timingSafeEqual(raw.subarray(raw.length - MAC_BYTES), Buffer.from(this.#mac(payload), 'latin1'))) return undefined;
    const match = /^([1-9][0-9]{0,18}):(available|pending|sold)?$/.exec(payload);
    if (!match) return undefined;
    return { afterId: BigInt(match[1]!), status: match[2] as PetStatus | undefined };
  }

  /**
   * The first MAC_BYTES bytes of the payload's HMAC-SHA-256, as latin1 text (a character a byte; payloads
   * are ASCII, so latin1 is their bytes too): a digest as text needs no Buffer of its own, which on the
   * uncached list's path cost more than the digest (BENCHMARKS.md, "The uncached list").
   */
  #mac(payload: string): string {
    return this.#hmac(payload).slice(0, MAC_BYTES);
  }
}
