/**
 * Sending a JSON answer that has an entity tag: the content coding the request accepts (compression.ts),
 * the tag of that representation, and `304 Not Modified` when `If-None-Match` names it (conditional.ts).
 * A 304 keeps every header set before (rate limits, request id, `Cache-Control`, `Link`, deprecation)
 * and `Vary`, and leaves out the body and its `Content-Type` (RFC 9110 §15.4.5).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { chooseCoding, compress, COMPRESSION_THRESHOLD } from './compression.ts';
import { codedTag, entityTag, noneMatchHits } from './conditional.ts';

/** The Content-Type of every JSON body the routes write as text. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/** An answer's body as first serialised (as keptBody keeps it), its tag, and the compressed forms made of it so far. */
export interface Representation {
  readonly body: string | Buffer;
  /** The strong entity tag of the uncompressed body. */
  readonly etag: string;
  /**
   * Filled the first time a request asks for a coding. A cached representation keeps them, so a page
   * is compressed once per coding however often it is served.
   */
  readonly encoded: { br?: Buffer; gzip?: Buffer };
}

/** A representation of a body; `also` names what else the answer carries that its tag must cover (a Link). */
export function representationOf(body: string, ...also: string[]): Representation {
  return { body: keptBody(body), etag: entityTag(body, ...also), encoded: {} };
}

/**
 * A body in the least memory that sends as fast, its bytes exactly what a cache counts: ASCII text
 * stays a string (one byte a character in V8, and the cheapest thing to send); any other text becomes
 * its UTF-8 bytes in memory of their own. V8 keeps a text with one character above U+00FF at two bytes
 * for every character, twice the UTF-8 of a page of escaped names, and would encode it for every answer.
 */
export function keptBody(text: string): string | Buffer {
  const length = Buffer.byteLength(text);
  if (length === text.length) return text;
  // Not Buffer.from: below 4 KiB it hands out a slice of a shared 8 KiB pool, which a cache would keep alive.
  const bytes = Buffer.allocUnsafeSlow(length);
  bytes.write(text);
  return bytes;
}

/** Adds a field name to `Vary`, keeping what is there (`Origin`, from CORS). */
function addVary(reply: FastifyReply, name: string): void {
  const vary = reply.getHeader('vary');
  reply.header('Vary', vary === undefined ? name : `${String(vary)}, ${name}`);
}

/** `onCompressed` is told when a compressed form was added to the representation (a cache counts it). */
export function sendRepresentation(
  request: FastifyRequest,
  reply: FastifyReply,
  representation: Representation,
  onCompressed?: () => void,
): FastifyReply {
  const { body, etag } = representation;
  const compressible = body.length >= COMPRESSION_THRESHOLD;
  const coding = compressible ? chooseCoding(request.headers['accept-encoding']) : 'identity';
  // Whether the answer could have come in another coding depends on its size only, not on the request.
  if (compressible) addVary(reply, 'Accept-Encoding');
  const tag = coding === 'identity' ? etag : codedTag(etag, coding);
  reply.header('ETag', tag);
  if (noneMatchHits(request.headers['if-none-match'], tag)) return reply.code(304).send();
  reply.type(JSON_TYPE);
  if (coding === 'identity') return reply.send(body);
  let bytes = representation.encoded[coding];
  if (bytes === undefined) {
    bytes = representation.encoded[coding] = compress(body, coding);
    onCompressed?.();
  }
  return reply.header('Content-Encoding', coding).send(bytes);
}
