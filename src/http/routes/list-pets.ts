/** listPets: GET /v1/pets (`/pets` under the document's /v1 servers), keyset-paginated in ascending id order. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CursorCodec } from '../../domain/cursor.ts';
import { DEFAULT_PAGE_SIZE } from '../../domain/page.ts';
import type { PetStatus } from '../../domain/pet.ts';
import type { PetStore } from '../../storage/store.ts';
import { ApiError } from '../api-error.ts';
import { PageCache } from '../page-cache.ts';
import { COMMON_ERRORS, errors, json } from '../responses.ts';
import { ListPetsQuery } from '../schemas.ts';

const JSON_TYPE = 'application/json; charset=utf-8';

export interface ListPetsDeps {
  pets: PetStore;
  cursors: CursorCodec;
  /** How many full pages to keep serialised (0: none). */
  pageCacheSize: number;
  /** How long a full page is reused where it can still change for a moment (see page-cache.ts). */
  pageCacheTtlMs: number;
  now: () => number;
  /** The API's base URL as clients reach it (PUBLIC_BASE_URL): the next page's link starts with it. */
  publicBaseUrl: string;
}

export const listPets: FastifyPluginAsyncTypebox<ListPetsDeps> = async (
  app,
  { pets, cursors, pageCacheSize, pageCacheTtlMs, now, publicBaseUrl },
) => {
  /** The RFC 8288 link to the page after the one ending at lastId, with the same filters and limit. */
  const nextLink = (limit: number, status: PetStatus | undefined, lastId: bigint): string => {
    const next = new URLSearchParams({ limit: String(limit) });
    if (status) next.set('status', status);
    next.set('cursor', cursors.encode({ afterId: lastId, status }));
    return `<${publicBaseUrl}/pets?${next}>; rel="next"`;
  };
  const finished = new PageCache(pageCacheSize, pets.fullPagesAreFinal ? Infinity : pageCacheTtlMs, now);
  app.get(
    '/pets',
    {
      schema: {
        operationId: 'listPets',
        summary: 'List animals',
        description:
          'Pets in ascending id order, optionally filtered by status. When more results exist the response ' +
          'carries `Link: <...>; rel="next"`, whose URL (same filters and limit, plus an opaque `cursor`) ' +
          'fetches the next page; the last page has no such link. Unknown query parameters are ignored.',
        tags: ['pets'],
        querystring: ListPetsQuery,
        response: {
          200: json(200, 'Pets', 'A page of pets.', { headers: ['NextPageLink'] }),
          ...errors([400, ...COMMON_ERRORS]),
        },
      },
    },
    async (request, reply) => {
      const { limit = DEFAULT_PAGE_SIZE, status, cursor } = request.query;
      // Keyed by the cursor as sent: a cached page proves its cursor was verified when first served,
      // so a hit skips the HMAC check as well as the query.
      const cacheKey = `${status ?? ''}:${limit}:${cursor ?? ''}`;
      const cached = finished.get(cacheKey);
      if (cached) return reply.header('Link', cached.link).type(JSON_TYPE).send(cached.body);

      let afterId: bigint | undefined;
      if (cursor !== undefined) {
        const position = cursors.decode(cursor);
        if (!position || position.status !== status) {
          throw new ApiError('invalid_request', 'Invalid cursor: it is malformed, was altered, or was made for another status filter', {
            details: [{ field: 'cursor', problem: 'is not a cursor this service issued for these filters' }],
          });
        }
        afterId = position.afterId;
      }

      if (pets.listPetsJson) {
        // The engine writes the page's JSON itself: no row objects to build and serialise again.
        const page = await pets.listPetsJson({ status, afterId, limit });
        if (!page.more) return reply.type(JSON_TYPE).send(page.json);
        const link = nextLink(limit, status, page.lastId!);
        finished.set(cacheKey, { body: page.json, link });
        return reply.header('Link', link).type(JSON_TYPE).send(page.json);
      }
      // One extra row tells whether a next page exists without a second query.
      const page = await pets.listPets({ status, afterId, limit: limit + 1 });
      if (page.length <= limit) return page;
      page.length = limit;
      const link = nextLink(limit, status, page[limit - 1]!.id);
      const body = reply.serialize(page) as string; // the route's JSON serializer yields text
      finished.set(cacheKey, { body, link });
      return reply.header('Link', link).type(JSON_TYPE).send(body);
    },
  );
};
