/**
 * GET /v1/openapi.json: the committed openapi.json, read once at start and served like a cached page,
 * with its ETag (and 304), compressed once per coding (87 KB as JSON, 8.8 KB in br, 9.1 KB in gzip).
 * The file is generated from the route schemas (`npm run openapi`, src/http/contract/openapi.ts) and a test
 * fails when it no longer matches them, so the document served is the one the routes describe.
 */
import type { FastifyInstance } from 'fastify';
import { readFileSync } from 'node:fs';
import { representationOf, sendRepresentation } from '../answers/representation.ts';

/** openapi.json at the project root: the same three levels up from src/http/routes and dist/http/routes. */
const OPENAPI_FILE = new URL('../../../openapi.json', import.meta.url);

let documentText: string | undefined;

/** The committed document's text, read once; the docs page reads its operations from it too. */
export function readOpenApiDocument(): string {
  return (documentText ??= readFileSync(OPENAPI_FILE, 'utf8'));
}

export function serveOpenApi(app: FastifyInstance): void {
  const document = representationOf(readOpenApiDocument());
  // Hidden from the document it serves: a generated client would grow a method for it, and the docs
  // page an entry. The document's introduction names it.
  app.get(
    '/openapi.json',
    { schema: { hide: true }, config: { public: true, docs: true } },
    // Cached for a minute, then revalidated with its ETag: a view of the docs page costs no request for
    // it within the minute, and a 304 after. Private: the answer carries the rate-limit headers of
    // whoever asked.
    async (request, reply) => sendRepresentation(request, reply.header('Cache-Control', 'private, max-age=60'), document),
  );
}
