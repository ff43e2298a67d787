/**
 * GET /v1/openapi.json: the committed openapi.json, read once at start and served like a cached page,
 * with its ETag (and 304), compressed once per coding (87 KB as JSON, 8.8 KB in br, 9.1 KB in gzip).
 * The file is generated from the route schemas (`npm run openapi`, src/http/contract/openapi.ts) and a test
 * fails when it no longer matches them, so the document served is the one the routes describe.
 */
import type { FastifyInstance } from 'fastify';
import { readFileSync } from 'node:fs';
import { conditionalRequest, errors, json, KEYLESS_ERRORS, notModified } from '../contract/responses.ts';
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
  app.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'getOpenApiDocument',
        summary: 'This document',
        description:
          'The OpenAPI 3.1 document of this interface, the one `/docs` renders. Needs no key; a request without one is counted ' +
          "against the client address's limit, one with a key against the key's. It carries an `ETag` (send it back in " +
          '`If-None-Match` to get `304 Not Modified`) and comes in br or gzip when `Accept-Encoding` asks.',
        tags: ['document'],
        security: [],
        ...conditionalRequest(),
        response: {
          200: json(200, 'OpenApiDocument', 'The OpenAPI document.', { headers: ['ETag'] }),
          304: notModified(),
          ...errors(KEYLESS_ERRORS),
        },
      },
      config: { public: true },
    },
    async (request, reply) => sendRepresentation(request, reply, document),
  );
}
