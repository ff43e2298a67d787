/**
 * Content codings for JSON answers: which one a request accepts (RFC 9110 §12.5.3) and the
 * compression itself, synchronous node:zlib at settings measured on list pages (docs/decisions.md,
 * Compression): brotli quality 4 and gzip level 6 cost 13 to 45 µs for a 1.4 to 7 KB page; brotli 11
 * saves at most 16 % more bytes for 50 to 140 times the CPU. Each cached answer is compressed once.
 */
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

export type Coding = 'br' | 'gzip' | 'identity';

/**
 * Bodies shorter than this many characters are sent as they are. An answer's headers alone are about
 * 700 bytes, so below 1 KiB compression saves at most a few hundred bytes of what already fits one
 * packet, for a few microseconds of CPU; a 20-pet page (about 1.4 KB) is above it.
 */
export const COMPRESSION_THRESHOLD = 1024;

const BROTLI_QUALITY = 4;
const GZIP_LEVEL = 6;

/** Where nothing says otherwise, identity is acceptable but the last choice (§12.5.3). */
const IDENTITY_BY_DEFAULT = 0.0001;

/** A qvalue (`0`, `0.5`, `1.000`), or undefined when the text is not one; the element is then ignored. */
function qvalue(text: string): number | undefined {
  return /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.test(text) ? Number(text) : undefined;
}

/**
 * The coding to send for an `Accept-Encoding` field: the acceptable one with the highest weight,
 * br before gzip before identity at equal weight. No field means no preference: identity, which every
 * client reads. When the field refuses identity and accepts nothing offered, identity is sent anyway
 * (the RFC lets a server disregard the field rather than answer 406).
 */
export function chooseCoding(acceptEncoding: string | undefined): Coding {
  if (acceptEncoding === undefined) return 'identity';
  let br: number | undefined;
  let gzip: number | undefined;
  let identity: number | undefined;
  let any: number | undefined;
  for (const element of acceptEncoding.split(',')) {
    const [rawName = '', ...params] = element.split(';');
    const name = rawName.trim().toLowerCase();
    if (name === '') continue;
    let q: number | undefined = 1;
    for (const param of params) {
      const [key = '', value = ''] = param.split('=');
      if (key.trim().toLowerCase() === 'q') q = qvalue(value.trim());
    }
    if (q === undefined) continue;
    // A coding named twice: the higher weight wins, so a stray repetition never refuses it.
    if (name === 'br') br = Math.max(br ?? 0, q);
    else if (name === 'gzip' || name === 'x-gzip') gzip = Math.max(gzip ?? 0, q);
    else if (name === 'identity') identity = Math.max(identity ?? 0, q);
    else if (name === '*') any = Math.max(any ?? 0, q);
  }
  const qBr = br ?? any ?? 0;
  const qGzip = gzip ?? any ?? 0;
  const qIdentity = identity ?? any ?? IDENTITY_BY_DEFAULT;
  if (qBr > 0 && qBr >= qGzip && qBr >= qIdentity) return 'br';
  if (qGzip > 0 && qGzip >= qIdentity) return 'gzip';
  return 'identity';
}

/**
 * The body in a content coding, in memory of its own size: node:zlib returns a view on its whole
 * output chunk (64 KiB), which a cached answer would otherwise keep alive for a few hundred bytes.
 */
export function compress(body: string, coding: 'br' | 'gzip'): Buffer {
  const bytes = Buffer.from(body);
  const coded =
    coding === 'gzip'
      ? gzipSync(bytes, { level: GZIP_LEVEL })
      : brotliCompressSync(bytes, {
          params: {
            [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
            [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
            [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
          },
        });
  const own = Buffer.allocUnsafeSlow(coded.length);
  coded.copy(own);
  return own;
}
