/**
 * GET /docs: interactive API documentation rendered in the browser by Redoc from the served OpenAPI
 * document. The renderer is served from this server, never from a CDN, so the page works offline and
 * behind a firewall: the build copies it into assets/ with gzip and brotli copies
 * (scripts/build-docs-assets.mjs), and the copy that the client accepts is sent as it is, under a
 * path that names its version, cached for a year. Every answer here is charged to the client's
 * address like a keyless API request (ANONYMOUS_RATE_LIMIT_PER_MINUTE). The page's
 * Content-Security-Policy allows only this origin's script and document; Redoc injects its styles
 * and runs its search in a worker made from a blob, which the policy names explicitly.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { GuardHook } from '../guard.ts';

/** assets/ at the project root: the same two levels up from src/http/routes and dist/http/routes. */
const ASSETS = new URL('../../../assets/', import.meta.url);

const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  'worker-src blob:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const page = (rendererPath: string) => `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Pet adoption API</title>
  <link rel="icon" href="data:,">
</head>
<body>
  <redoc spec-url="/v1/openapi.json" hide-download-button="false" expand-responses="200,201,429" native-scrollbars></redoc>
  <script src="${rendererPath}"></script>
</body>
</html>
`;

/** One stored representation of the renderer; each has its own strong ETag (RFC 9110 §8.8.3). */
interface Representation {
  coding: 'br' | 'gzip' | 'identity';
  bytes: Buffer;
  etag: string;
}

/** The renderer as built, in each content coding, best first; identity last, for any client. */
function loadRenderer(): { version: string; representations: Representation[] } {
  const read = (suffix: string) => {
    try {
      return readFileSync(new URL(`redoc.standalone.js${suffix}`, ASSETS));
    } catch (err) {
      throw new Error(`The documentation page's renderer is missing from assets/ (run npm run build): ${(err as Error).message}`, {
        cause: err,
      });
    }
  };
  const identity = read('');
  const version = createHash('sha256').update(identity).digest('base64url').slice(0, 22);
  return {
    version,
    representations: [
      { coding: 'br', bytes: read('.br'), etag: `"${version}-br"` },
      { coding: 'gzip', bytes: read('.gz'), etag: `"${version}-gzip"` },
      { coding: 'identity', bytes: identity, etag: `"${version}"` },
    ],
  };
}

/** Whether an Accept-Encoding value accepts the coding (RFC 9110 §12.5.3): listed, or `*`, with q > 0. */
export function acceptsCoding(acceptEncoding: string | undefined, coding: string): boolean {
  if (acceptEncoding === undefined) return false;
  let wildcard = false;
  for (const item of acceptEncoding.split(',')) {
    const [name = '', ...params] = item.split(';').map((part) => part.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    const accepted = q === undefined || Number(q.slice(2)) > 0;
    if (name === coding) return accepted;
    if (name === '*') wildcard = accepted;
  }
  return wildcard;
}

export interface DocsOptions {
  /** Charged before each answer: the pages are limited per address like keyless API requests. */
  limit: GuardHook;
}

export async function docs(app: FastifyInstance, { limit }: DocsOptions): Promise<void> {
  const renderer = loadRenderer();
  // The renderer's path names its version, so it can be cached for a year: a new build is a new path.
  const rendererPath = `/docs/redoc.standalone.${renderer.version}.js`;
  const html = page(rendererPath);
  const route = { schema: { hide: true }, onRequest: limit };
  app.get('/docs', route, async (_request, reply) =>
    reply.header('Content-Security-Policy', DOCS_CSP).header('Cache-Control', 'no-cache').type('text/html; charset=utf-8').send(html),
  );
  app.get(rendererPath, route, async (request, reply) => {
    const accept = request.headers['accept-encoding'];
    const chosen = renderer.representations.find((r) => r.coding === 'identity' || acceptsCoding(accept, r.coding))!;
    reply
      .header('Cache-Control', 'public, max-age=31536000, immutable')
      .header('Vary', 'Accept-Encoding')
      .header('ETag', chosen.etag)
      .type('text/javascript; charset=utf-8');
    if (chosen.coding !== 'identity') reply.header('Content-Encoding', chosen.coding);
    if (request.headers['if-none-match']?.split(',').some((tag) => tag.trim().replace(/^W\//, '') === chosen.etag)) {
      return reply.code(304).send();
    }
    return reply.send(chosen.bytes);
  });
}
