/**
 * Content codings for JSON answers: which one a request accepts (RFC 9110 §12.5.3, read by negotiator) and the
 * compression itself, synchronous node:zlib at settings measured on list pages (docs/decisions.md,
 * Compression): brotli quality 4 and gzip level 6 cost 13 to 45 µs for a 1.4 to 7 KB page; brotli 11
 * saves at most 16 % more bytes for 50 to 140 times the CPU. Each cached answer is compressed once.
 */
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import Negotiator from 'negotiator';

export type Coding = 'br' | 'gzip' | 'identity';

/**
 * Bodies shorter than this many bytes are sent as they are. An answer's headers alone are about
 * 700 bytes, so below 1 KiB compression saves at most a few hundred bytes of what already fits one
 * packet, for a few microseconds of CPU; a 20-pet page (about 1.4 KB) is above it.
 */
export const COMPRESSION_THRESHOLD = 1024;

const BROTLI_QUALITY = 4;
const GZIP_LEVEL = 6;

/** The codings offered, in the order taken at equal weight; x-gzip is gzip's old name (RFC 9110 §12.5.3). */
const OFFERED = ['br', 'gzip', 'x-gzip', 'identity'];

/** negotiator 1.x breaks ties by the server's order when told it; the published types (0.6) predate the option. */
type PreferringNegotiator = Negotiator & {
  encoding(available: readonly string[], options: { preferred: readonly string[] }): string | undefined;
};

/**
 * The coding to send for an `Accept-Encoding` field, read by negotiator: the acceptable one with the
 * highest weight, br before gzip before identity at equal weight. No field means no preference:
 * identity, which every client reads. When the field refuses identity and accepts nothing offered,
 * identity is sent anyway (the RFC lets a server disregard the field rather than answer 406).
 */
export function chooseCoding(acceptEncoding: string | undefined): Coding {
  if (acceptEncoding === undefined) return 'identity';
  const negotiator = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } }) as PreferringNegotiator;
  const chosen = negotiator.encoding(OFFERED, { preferred: OFFERED });
  return chosen === 'br' ? 'br' : chosen === 'gzip' || chosen === 'x-gzip' ? 'gzip' : 'identity';
}

/**
 * The body in a content coding, in memory of its own size: node:zlib returns a view on its whole
 * output chunk (64 KiB), which a cached answer would otherwise keep alive for a few hundred bytes.
 */
export function compress(body: string | Buffer, coding: 'br' | 'gzip'): Buffer {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
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
