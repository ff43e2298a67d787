/**
 * JSON request bodies, parsed without losing int64 precision.
 *
 * JSON.parse turns 9223372036854775807 into 9223372036854775808. We parse with lossless-json instead:
 * the body handed to schema validation holds ordinary numbers (so the schema checks types and
 * bounds as usual), and the exact integer value of every top-level numeric field is kept beside it
 * on the request, for the handler to read int64 fields from. lossless-json also refuses duplicate
 * keys, which JSON.parse would silently collapse.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isLosslessNumber, parse } from 'lossless-json';
import { ApiError } from './errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Exact values of the body's top-level integer-valued numbers; undefined for non-integers. */
    exactIntegers: Map<string, bigint | undefined> | undefined;
  }
}

/** The exact integer a JSON number literal denotes (1, 1.0, 1e3 ...), or undefined if it has a fraction. */
export function exactInteger(literal: string): bigint | undefined {
  const m = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/.exec(literal);
  if (!m) return undefined;
  const fraction = m[3] ?? '';
  let digits = m[2]! + fraction;
  const exponent = Number(m[4] ?? '0') - fraction.length;
  if (exponent > 0) {
    const significant = digits.replace(/^0+/, '');
    if (significant === '') return 0n;
    // Anything this large is far outside int64 already; avoid building a huge string.
    if (significant.length + exponent > 40) return BigInt(m[1] + '1' + '0'.repeat(40));
    digits += '0'.repeat(exponent);
  } else if (exponent < 0) {
    const dropped = digits.slice(exponent);
    if (/[^0]/.test(dropped)) return undefined;
    digits = digits.slice(0, exponent) || '0';
  }
  return BigInt(m[1] + digits);
}

function toPlain(value: unknown): unknown {
  if (isLosslessNumber(value)) return Number(value.value);
  if (Array.isArray(value)) return value.map(toPlain);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      // defineProperty: a "__proto__" key stays a plain field instead of changing the prototype.
      Object.defineProperty(out, k, { value: toPlain(v), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return value;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * JSON text must be UTF-8 (RFC 8259). A lenient decoder would turn invalid bytes into U+FFFD and
 * store a name other than the one sent; these bytes are refused instead.
 */
function decodeUtf8(body: Buffer): string {
  try {
    return STRICT_UTF8.decode(body);
  } catch {
    throw new ApiError('invalid_request', 'Request body is not valid UTF-8');
  }
}

export function parseJsonBody(request: FastifyRequest, text: string): unknown {
  let parsed: unknown;
  try {
    parsed = parse(text);
  } catch (err) {
    const reason = err instanceof RangeError ? 'it is nested too deeply' : (err as Error).message;
    throw new ApiError('invalid_request', `Request body is not valid JSON: ${reason}`);
  }
  if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
    const exact = new Map<string, bigint | undefined>();
    for (const [k, v] of Object.entries(parsed)) if (isLosslessNumber(v)) exact.set(k, exactInteger(v.value));
    request.exactIntegers = exact;
  }
  return toPlain(parsed);
}

export function installJsonBodyParser(app: FastifyInstance): void {
  app.decorateRequest('exactIntegers', undefined);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
      done(new ApiError('unsupported_media_type', `Content-Encoding ${encoding} is not supported; send the body uncompressed`), undefined);
      return;
    }
    try {
      done(null, parseJsonBody(request, decodeUtf8(body as Buffer)));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
