/**
 * Build step: copies the documentation page's renderer (the standalone browser bundle of Scalar's API
 * reference) out of the build-time `@scalar/api-reference` package into assets/, next to a gzip and a
 * brotli copy made once here at the highest settings. The server serves these files, so a production
 * install carries no renderer package and no request pays for compression.
 *
 * Plain JavaScript, not TypeScript: `npm start` runs the build (scripts/build.mjs), and must work on
 * every Node.js the project supports, including those without built-in type stripping.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

/** The name src/http/site/docs.ts reads. */
const NAME = 'scalar.standalone.js';
const OUT = new URL('../assets/', import.meta.url);
const SUFFIXES = ['', '.gz', '.br'];

/** The files this step writes, from the project's root. */
export const DOCS_ASSETS = SUFFIXES.map((suffix) => `assets/${NAME}${suffix}`);

/** The renderer's bundle in node_modules: what the copies are made from. */
export function rendererSource() {
  // The package's exports list neither its browser bundle nor its package.json: the bundle is found
  // next to the main entry (dist/index.js).
  const main = createRequire(import.meta.url).resolve('@scalar/api-reference');
  return join(dirname(main), 'browser', 'standalone.js');
}

/** Writes the copies, unless those in assets/ are already this renderer's. */
export function buildDocsAssets() {
  const renderer = readFileSync(rendererSource());

  // The previous renderer's copies, left by builds made before it was replaced: the runtime image copies
  // all of assets/, so they would ship unused.
  for (const suffix of SUFFIXES) rmSync(new URL(`redoc.standalone.js${suffix}`, OUT), { force: true });

  // When the copies are already those of this renderer, there is nothing to do (compressing takes
  // seconds).
  const built = SUFFIXES.every((suffix) => existsSync(new URL(`${NAME}${suffix}`, OUT)));
  if (built && readFileSync(new URL(NAME, OUT)).equals(renderer)) return;

  mkdirSync(OUT, { recursive: true });
  // The plain copy last: it marks the compressed ones as complete.
  writeFileSync(new URL(`${NAME}.gz`, OUT), gzipSync(renderer, { level: 9 }));
  writeFileSync(
    new URL(`${NAME}.br`, OUT),
    brotliCompressSync(renderer, {
      params: {
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
        // The bundle is larger than the default 4 MiB window; the largest standard window (16 MiB,
        // which every browser decodes) lets matches reach across the whole file.
        [constants.BROTLI_PARAM_LGWIN]: constants.BROTLI_MAX_WINDOW_BITS,
        [constants.BROTLI_PARAM_SIZE_HINT]: renderer.length,
      },
    }),
  );
  writeFileSync(new URL(NAME, OUT), renderer);
}
