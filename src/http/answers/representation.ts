/**
 * Sending a JSON answer that has an entity tag: the content coding the request accepts (compression.ts),
 * the tag of that representation, and `304 Not Modified` when `If-None-Match` names it (conditional.ts).
 * A 304 keeps every header set before (rate limits, request id, `Cache-Control`, `Link`, deprecation)
 * and `Vary`, and leaves out the body and its `Content-Type` (RFC 9110 §15.4.5).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { chooseCoding, compress, COMPRESSION_THRESHOLD } from './compression.ts';
import { codedTag, entityTag, noneMatchHits } from './conditional.ts';

const JSON_TYPE = 'application/json; charset=utf-8';

/** An answer's body as first serialised, its tag, and the compressed forms made of it so far. */
export interface Representation {
  readonly body: string;
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
  return { body, etag: entityTag(body, ...also), encoded: {} };
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
