/** getPet: GET /v1/pets/{petId} (`/pets/{petId}` under the document's /v1 servers), deprecated; 410 from its sunset moment on. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { getPetDeprecationHeaders, isGetPetSunset } from '../../domain/deprecation.ts';
import { docsUrlBeside } from '../urls.ts';
import { parsePositiveInt64, POSITIVE_INT64_PROBLEM } from '../../domain/int64.ts';
import { petJson } from '../../domain/pet-json.ts';
import type { PetStore } from '../../storage/store.ts';
import { ApiError } from '../contract/api-error.ts';
import type { CacheName, WatchedCache } from '../../metrics.ts';
import { PageCache, PET_ENTRY_OVERHEAD_BYTES } from '../answers/page-cache.ts';
import { representationOf, sendRepresentation, type Representation } from '../answers/representation.ts';
import { COMMON_ERRORS, conditionalRequest, errors, json, notModified } from '../contract/responses.ts';
import { PetIdParams } from '../contract/schemas.ts';

export interface GetPetDeps {
  pets: PetStore;
  /** Bytes the pets kept serialised may hold (PET_CACHE_BYTES; 0: none). */
  cacheBytes: number;
  watchCache: (name: CacheName, cache: WatchedCache) => void;
  now: () => number;
  /** The API's base URL as clients reach it (PUBLIC_BASE_URL): the replacement's link starts with it. */
  publicBaseUrl: string;
}

export const getPet: FastifyPluginAsyncTypebox<GetPetDeps> = async (app, { pets, cacheBytes, watchCache, now, publicBaseUrl }) => {
  const deprecationHeaders = getPetDeprecationHeaders(publicBaseUrl, docsUrlBeside(publicBaseUrl));
  /**
   * Found pets kept serialised, by id, one cache per app (per process in service). A pet never
   * changes once created, so an answer once read is final on every engine; an id that was not found
   * is not kept, since the pet may be created a moment later (on another instance).
   */
  const known = new PageCache<Representation>({ maxBytes: cacheBytes, entryOverheadBytes: PET_ENTRY_OVERHEAD_BYTES, ttlMs: Infinity, now });
  watchCache('pets', known);
  app.get(
    '/pets/:petId',
    {
      schema: {
        operationId: 'getPet',
        summary: 'Get an animal (deprecated)',
        description:
          'Deprecated: removal is announced for 5 December 2030 (`Sunset`); from then on this operation answers ' +
          '410 with code `gone`. Use `GET /pets` (listPets) with the `status` filter instead. Every response carries ' +
          '`Deprecation`, `Sunset` and `Link`. A pet never changes: its `ETag` stays valid, and `If-None-Match` with it gets ' +
          '`304 Not Modified` without the body.',
        deprecated: true,
        tags: ['pets'],
        params: PetIdParams,
        ...conditionalRequest(),
        response: {
          200: json(200, 'Pet', 'The pet.', { deprecated: true, headers: ['ETag'] }),
          304: notModified({ deprecated: true }),
          ...errors([400, 404, 410, ...COMMON_ERRORS], { deprecated: true }),
        },
      },
      // onSend runs for every response of this route, errors included.
      onSend: (_request, reply, payload, done) => {
        reply.headers(deprecationHeaders);
        done(null, payload);
      },
      // A callback hook, not an async one: it runs on every getPet request, and a promise costs more than the check.
      onRequest: (_request, _reply, done) => {
        if (!isGetPetSunset(now())) return done();
        done(new ApiError('gone', 'GET /v1/pets/{petId} was removed on 5 December 2030; use GET /v1/pets'));
      },
    },
    async (request, reply) => {
      // int64 path parameters reach the handler as text (see validation.ts), so the conversion is exact.
      const id = parsePositiveInt64(request.params.petId as unknown as string);
      if (id === undefined) {
        throw new ApiError('invalid_request', `Invalid path: petId ${POSITIVE_INT64_PROBLEM}`, {
          details: [{ field: 'petId', problem: POSITIVE_INT64_PROBLEM }],
        });
      }
      const key = String(id); // canonical: `/pets/007` and `/pets/7` are one entry
      let found = known.get(key);
      if (!found) {
        const pet = await pets.getPet(id);
        if (!pet) throw new ApiError('not_found', `No pet with id ${id}`);
        found = representationOf(petJson(pet));
        known.set(key, found);
      }
      return sendRepresentation(request, reply, found, () => known.remeasure(key));
    },
  );
};
