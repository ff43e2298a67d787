/**
 * GET /docs: interactive API documentation rendered in the browser by Redoc from the served OpenAPI
 * document. The renderer is served from this server, never from a CDN, so the page works offline and
 * behind a firewall: the build copies it into assets/ with gzip and brotli copies
 * (scripts/build-docs-assets.mjs), and the copy that the client accepts is sent as it is. Its
 * Content-Security-Policy allows only this origin's script and
 * document; Redoc injects its styles and runs its search in a worker made from a blob, which the
 * policy names explicitly.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';

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

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Pet adoption API</title>
  <link rel="icon" href="data:,">
</head>
<body>
  <redoc spec-url="/v1/openapi.json" hide-download-button="false" expand-responses="200,201,429" native-scrollbars></redoc>
  <script src="/docs/redoc.standalone.js"></script>
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
function loadRenderer(): Representation[] {
  const read = (suffix: string) => {
    try {
      return readFileSync(new URL(`redoc.standalone.js${suffix}`, ASSETS));
    } catch (err) {
      throw new Error(`The documentation page's renderer is missing from assets/ (run npm run build): ${(err as Error).message}`);
    }
  };
  const identity = read('');
  const version = createHash('sha256').update(identity).digest('base64url').slice(0, 22);
  return [
    { coding: 'br', bytes: read('.br'), etag: `"${version}-br"` },
    { coding: 'gzip', bytes: read('.gz'), etag: `"${version}-gzip"` },
    { coding: 'identity', bytes: identity, etag: `"${version}"` },
  ];
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

export async function docs(app: FastifyInstance): Promise<void> {
  const renderer = loadRenderer();
  const probe = { schema: { hide: true } };
  app.get('/docs', probe, async (_request, reply) =>
    reply.header('Content-Security-Policy', DOCS_CSP).header('Cache-Control', 'no-cache').type('text/html; charset=utf-8').send(PAGE),
  );
  app.get('/docs/redoc.standalone.js', probe, async (request, reply) => {
    const accept = request.headers['accept-encoding'];
    const chosen = renderer.find((r) => r.coding === 'identity' || acceptsCoding(accept, r.coding))!;
    reply
      .header('Cache-Control', 'public, max-age=86400')
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
