/** listPets: GET /v1/pets (`/pets` under the document's /v1 servers), keyset-paginated in ascending id order. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CursorCodec } from '../../domain/cursor.ts';
import { DEFAULT_PAGE_SIZE } from '../../domain/page.ts';
import type { PetStatus } from '../../domain/pet.ts';
import type { ListPetsQuery as PageQuery, PetPageJson, PetStore } from '../../storage/store.ts';
import { ApiError } from '../contract/api-error.ts';
import type { CacheName, WatchedCache } from '../../metrics.ts';
import { COMPRESSION_THRESHOLD } from '../answers/compression.ts';
import { entityTag } from '../answers/conditional.ts';
import { PAGE_ENTRY_OVERHEAD_BYTES, PageCache, type CachedPage } from '../answers/page-cache.ts';
import { keptBody, representationOf, sendRepresentation, type Representation } from '../answers/representation.ts';
import { COMMON_ERRORS, conditionalRequest, errors, json, notModified } from '../contract/responses.ts';
import { ListPetsQuery } from '../contract/schemas.ts';

/**
 * Bytes the last pages kept for their compressed forms may hold: one per filter, page size and
 * position that clients poll at the end of the list, each a page's body and its codings (about
 * 10 KB for 100 pets of ordinary names, so a few hundred pages); a constant, not a setting.
 */
const LAST_PAGES_BYTES = 4 * 1024 * 1024;

export interface ListPetsDeps {
  pets: PetStore;
  cursors: CursorCodec;
  /** Bytes the full pages kept serialised may hold (0: none). */
  pageCacheBytes: number;
  /** How long a full page is reused where it can still change for a moment (see page-cache.ts). */
  pageCacheTtlMs: number;
  watchCache: (name: CacheName, cache: WatchedCache) => void;
  now: () => number;
  /** The API's base URL as clients reach it (PUBLIC_BASE_URL): the next page's link starts with it. */
  publicBaseUrl: string;
}

export const listPets: FastifyPluginAsyncTypebox<ListPetsDeps> = async (
  app,
  { pets, cursors, pageCacheBytes, pageCacheTtlMs, watchCache, now, publicBaseUrl },
) => {
  /**
   * The RFC 8288 link to the page after the one ending at lastId, with the same filters and limit.
   * Written without URLSearchParams: an integer, a status name and a base64url cursor need no escaping.
   */
  const nextLink = (limit: number, status: PetStatus | undefined, lastId: bigint): string => {
    const cursor = cursors.encode({ afterId: lastId, status });
    return `<${publicBaseUrl}/pets?limit=${limit}${status ? `&status=${status}` : ''}&cursor=${cursor}>; rel="next"`;
  };
  const finished = new PageCache({
    maxBytes: pageCacheBytes,
    entryOverheadBytes: PAGE_ENTRY_OVERHEAD_BYTES,
    ttlMs: pets.fullPagesAreFinal ? Infinity : pageCacheTtlMs,
    now,
  });
  watchCache('pages', finished);
  /**
   * The last pages read lately, kept for their compressed forms only: a last page is read fresh every
   * time, but while its body stays the same (its tag says so) the br or gzip made for an earlier reader
   * is reused. Compressing a 100-pet last page on every request would add a quarter to half of what
   * the request costs (docs/decisions.md, Compression).
   */
  const lastPages = new PageCache<Representation>({
    maxBytes: LAST_PAGES_BYTES,
    entryOverheadBytes: PAGE_ENTRY_OVERHEAD_BYTES,
    ttlMs: Infinity,
    now,
  });
  watchCache('last_pages', lastPages);
  /**
   * Reads under way, by the same key as the cache: a request for a page already being read waits for
   * that read instead of starting its own. Where pages expire (PostgreSQL), every request in flight
   * when a popular page expires would otherwise query it at once, queueing on the pool.
   */
  const reading = new Map<string, Promise<PetPageJson>>();
  const readPage = (key: string, query: PageQuery): Promise<PetPageJson> => {
    let read = reading.get(key);
    if (read === undefined) {
      read = pets.listPetsJson(query).finally(() => reading.delete(key));
      reading.set(key, read);
    }
    return read;
  };
  const lastPageAsRead = (key: string, text: string): Representation => {
    // The tag first: a page kept unchanged is served as kept, its body never converted again.
    const etag = entityTag(text);
    const kept = lastPages.get(key);
    if (kept?.etag === etag) return kept;
    const read: Representation = { body: keptBody(text), etag, encoded: {} };
    if (read.body.length >= COMPRESSION_THRESHOLD) lastPages.set(key, read); // smaller: never compressed, nothing worth keeping
    return read;
  };
  app.get(
    '/pets',
    {
      schema: {
        operationId: 'listPets',
        summary: 'List animals',
        description:
          'Pets in ascending id order, optionally filtered by status. When more results exist the response ' +
          'carries `Link: <...>; rel="next"`, whose URL (same filters and limit, plus an opaque `cursor`) ' +
          'fetches the next page; the last page has no such link. Unknown query parameters are ignored. ' +
          'Every page carries an `ETag`: send it back in `If-None-Match` to get `304 Not Modified` without the body while the ' +
          'page is unchanged (pages that have a next page are stable; the last page changes as pets are added).',
        tags: ['pets'],
        querystring: ListPetsQuery,
        ...conditionalRequest(),
        response: {
          200: json(200, 'Pets', 'A page of pets.', { headers: ['NextPageLink', 'ETag'] }),
          304: notModified({ headers: ['NextPageLink'] }),
          ...errors([400, ...COMMON_ERRORS]),
        },
      },
    },
    async (request, reply) => {
      const { limit = DEFAULT_PAGE_SIZE, status, cursor } = request.query;
      // Keyed by the cursor as sent: a cached page proves its cursor was verified when first served,
      // so a hit skips the HMAC check as well as the query. An empty `cursor=` is a cursor (a malformed
      // one, a 400), never the first page's key.
      const cacheKey = `${status ?? ''}:${limit}${cursor === undefined ? '' : `:${cursor}`}`;
      const cached = finished.get(cacheKey);
      // Each cache counts a compressed form when it is added, the first time a coding is asked for.
      if (cached) return sendRepresentation(request, reply.header('Link', cached.link), cached, () => finished.remeasure(cacheKey));

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

      // The engine writes the page's JSON itself: no row objects to build and serialise again.
      const { json: body, more, lastId } = await readPage(cacheKey, { status, afterId, limit });
      // The last page is served as read, its tag taken from its body each time: it changes as pets are added.
      if (!more || lastId === undefined) {
        return sendRepresentation(request, reply, lastPageAsRead(cacheKey, body), () => lastPages.remeasure(cacheKey));
      }
      const link = nextLink(limit, status, lastId);
      const full: CachedPage = { ...representationOf(body, link), link };
      finished.set(cacheKey, full);
      return sendRepresentation(request, reply.header('Link', link), full, () => finished.remeasure(cacheKey));
    },
  );
};
