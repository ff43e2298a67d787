/**
 * GET /docs: interactive API documentation rendered in the browser by Redoc from the served OpenAPI
 * document. The renderer is served from the installed package, never from a CDN, so the page works
 * offline and behind a firewall. Its Content-Security-Policy allows only this origin's script and
 * document; Redoc injects its styles and runs its search in a worker made from a blob, which the
 * policy names explicitly.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';

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

export async function docs(app: FastifyInstance): Promise<void> {
  const renderer = readFileSync(createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js'));
  const probe = { schema: { hide: true } };
  app.get('/docs', probe, async (_request, reply) =>
    reply.header('Content-Security-Policy', DOCS_CSP).header('Cache-Control', 'no-cache').type('text/html; charset=utf-8').send(PAGE),
  );
  app.get('/docs/redoc.standalone.js', probe, async (_request, reply) =>
    reply.header('Cache-Control', 'public, max-age=86400').type('text/javascript; charset=utf-8').send(renderer),
  );
}
