/**
 * JSON request bodies: parsed by the platform's JSON.parse, with what it leaves out added here.
 *
 * - Exact int64. JSON.parse turns 9223372036854775807 into 9223372036854775808. Schema validation
 *   runs on those ordinary numbers (it checks types and bounds); a handler that needs an exact
 *   integer reads it afterwards with exactTopLevelIntegers, which finds each top-level number's
 *   source text in the kept text. Only bodies that passed validation (a few small fields) pay for it.
 * - Duplicate keys. JSON.parse keeps the last of two equal keys; the body is refused instead when its
 *   top level names a key twice, whatever the values. (Fields are all top-level: a nested object is
 *   refused by the schema anyway.)
 * - Many fields. A body with more than 64 top-level fields is refused before schema validation, which
 *   would otherwise report (and pay for) each unknown one.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, clip } from '../contract/api-error.ts';

/** The largest request body accepted (413 beyond it). */
export const BODY_LIMIT_BYTES = 64 * 1024;
/** More top-level fields than any resource has, by far; a body with more is refused at once. */
const MAX_TOP_LEVEL_FIELDS = 64;

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON body's text as received, for exactTopLevelIntegers. */
    jsonText: string | undefined;
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

/**
 * Calls `member` for each member of the top-level object, in order, with its key's raw literal
 * (`"name"`, `"n\u0061me"`) and, when its value is a number, that number's literal. Walks text that
 * JSON.parse has already accepted: strings are skipped whole, nesting is counted.
 */
function forEachTopLevelMember(text: string, member: (keyLiteral: string, numberLiteral: string | undefined) => void): void {
  let depth = 0;
  let expectKey = false;
  /** The key literal whose value has not been reached yet. */
  let pending: string | undefined;
  const valueReached = (numberLiteral: string | undefined) => {
    if (pending !== undefined) member(pending, numberLiteral);
    pending = undefined;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i;
      for (i++; text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c /* \ */) i++;
      if (depth === 1 && expectKey) pending = text.slice(start, i + 1);
      else if (depth === 1) valueReached(undefined);
      expectKey = false;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39) /* 0-9 */) {
      let end = i + 1;
      while (end < text.length && isNumberChar(text.charCodeAt(end))) end++;
      if (depth === 1) valueReached(text.slice(i, end));
      i = end - 1;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (depth === 1) valueReached(undefined);
      depth++;
      expectKey = depth === 1 && c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      if (depth === 1) valueReached(undefined);
      depth--;
    } else if (c === 0x2c /* , */ && depth === 1) {
      valueReached(undefined);
      expectKey = true;
    }
  }
}

/** Digits, sign, point and exponent: what a JSON number literal is made of after its first character. */
function isNumberChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;
}

/** A key's raw literal unescaped; most keys have nothing to unescape. */
function keyOf(literal: string): string {
  return literal.includes('\\') ? (JSON.parse(literal) as string) : literal.slice(1, -1);
}

/** The first key the top-level object names twice (compared after unescaping), if any. */
export function duplicateTopLevelKey(text: string, parsed: object): string | undefined {
  const literals: string[] = [];
  forEachTopLevelMember(text, (literal) => literals.push(literal));
  if (literals.length === Object.keys(parsed).length) return undefined;
  const seen = new Set<string>();
  for (const literal of literals) {
    const key = keyOf(literal);
    if (seen.has(key)) return key;
    seen.add(key);
  }
  return undefined;
}

/**
 * The exact values of the top-level object's integer-valued numbers (1, 1.0, 1e3 ...) by key;
 * undefined for a number with a fraction. Each number's source text is found by walking text that
 * JSON.parse has already accepted (forEachTopLevelMember): a reviver with source text access
 * would find the same literals but costs several times the parse itself.
 */
export function exactTopLevelIntegers(text: string): Map<string, bigint | undefined> {
  const exact = new Map<string, bigint | undefined>();
  forEachTopLevelMember(text, (keyLiteral, numberLiteral) => {
    if (numberLiteral !== undefined) exact.set(keyOf(keyLiteral), exactInteger(numberLiteral));
  });
  return exact;
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
  // RFC 8259 forbids sending one; JSON.parse would refuse it as an unexpected token that shows as nothing.
  if (text.startsWith('\ufeff'))
    throw new ApiError('invalid_request', 'Request body starts with a byte order mark (U+FEFF); send the JSON text without it');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const reason = err instanceof RangeError ? 'it is nested too deeply' : (err as Error).message;
    throw new ApiError('invalid_request', `Request body is not valid JSON: ${reason}`);
  }
  if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
    const fields = Object.keys(parsed).length;
    if (fields > MAX_TOP_LEVEL_FIELDS) {
      // Refused before schema validation, which would list every unknown field at some cost.
      throw new ApiError('invalid_request', `Request body has ${fields} fields; at most ${MAX_TOP_LEVEL_FIELDS} are accepted`, {
        details: [{ field: 'body', problem: `has more than ${MAX_TOP_LEVEL_FIELDS} fields` }],
      });
    }
    const duplicate = duplicateTopLevelKey(text, parsed);
    if (duplicate !== undefined) {
      const field = clip(duplicate);
      throw new ApiError('invalid_request', `Request body names the field "${field}" more than once`, {
        details: [{ field, problem: 'appears more than once' }],
      });
    }
  }
  request.jsonText = text;
  return parsed;
}

export const jsonBodies = fp(
  async (app: FastifyInstance) => {
    app.decorateRequest('jsonText', undefined);
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
      const encoding = request.headers['content-encoding'];
      if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
        done(
          new ApiError('unsupported_media_type', `Content-Encoding ${clip(encoding)} is not supported; send the body uncompressed`),
          undefined,
        );
        return;
      }
      try {
        done(null, parseJsonBody(request, decodeUtf8(body as Buffer)));
      } catch (err) {
        done(err as Error, undefined);
      }
    });
  },
  { name: 'json-bodies' },
);
