/**
 * Build step: copies the documentation page's renderer (Redoc's standalone bundle) out of the
 * build-time `redoc` package into assets/, next to a gzip and a brotli copy made once here at the
 * highest settings. The server serves these files, so a production install carries no renderer
 * package and no request pays for compression.
 *
 * Plain JavaScript, not TypeScript: `npm start` runs the build, and must work on every Node.js the
 * project supports, including those without built-in type stripping.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const source = createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js');
const out = new URL('../assets/', import.meta.url);
const renderer = readFileSync(source);

// `npm start` builds every time: when the copies are already those of this renderer, there is
// nothing to do (compressing takes seconds).
const built = ['', '.gz', '.br'].every((suffix) => existsSync(new URL(`redoc.standalone.js${suffix}`, out)));
if (built && readFileSync(new URL('redoc.standalone.js', out)).equals(renderer)) process.exit(0);

mkdirSync(out, { recursive: true });
// The plain copy last: it marks the compressed ones as complete.
writeFileSync(new URL('redoc.standalone.js.gz', out), gzipSync(renderer, { level: 9 }));
writeFileSync(
  new URL('redoc.standalone.js.br', out),
  brotliCompressSync(renderer, {
    params: {
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
      [constants.BROTLI_PARAM_SIZE_HINT]: renderer.length,
    },
  }),
);
writeFileSync(new URL('redoc.standalone.js', out), renderer);
