/** getPet: GET /v1/pets/{petId} (`/pets/{petId}` under the document's /v1 servers), deprecated; 410 from its sunset moment on. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { getPetDeprecationHeaders, isGetPetSunset } from '../../domain/deprecation.ts';
import { docsUrlBeside } from '../api.ts';
import { parsePositiveInt64, POSITIVE_INT64_PROBLEM } from '../../domain/int64.ts';
import type { PetStore } from '../../storage/store.ts';
import { ApiError } from '../api-error.ts';
import { COMMON_ERRORS, errors, json } from '../responses.ts';
import { PetIdParams } from '../schemas.ts';

export interface GetPetDeps {
  pets: PetStore;
  now: () => number;
  /** The API's base URL as clients reach it (PUBLIC_BASE_URL): the replacement's link starts with it. */
  publicBaseUrl: string;
}

export const getPet: FastifyPluginAsyncTypebox<GetPetDeps> = async (app, { pets, now, publicBaseUrl }) => {
  const deprecationHeaders = getPetDeprecationHeaders(publicBaseUrl, docsUrlBeside(publicBaseUrl));
  app.get(
    '/pets/:petId',
    {
      schema: {
        operationId: 'getPet',
        summary: 'Get an animal (deprecated)',
        description:
          'Deprecated: removal is announced for 5 December 2030 (`Sunset`); from then on this operation answers ' +
          '410 with code `gone`. Use `GET /pets` (listPets) with the `status` filter instead. Every response carries ' +
          '`Deprecation`, `Sunset` and `Link`.',
        deprecated: true,
        tags: ['pets'],
        params: PetIdParams,
        response: {
          200: json(200, 'Pet', 'The pet.', { deprecated: true }),
          ...errors([400, 404, 410, ...COMMON_ERRORS], { deprecated: true }),
        },
      },
      // onSend runs for every response of this route, errors included.
      onSend: (_request, reply, payload, done) => {
        reply.headers(deprecationHeaders);
        done(null, payload);
      },
      onRequest: async () => {
        if (isGetPetSunset(now())) {
          throw new ApiError('gone', 'GET /v1/pets/{petId} was removed on 5 December 2030; use GET /v1/pets');
        }
      },
    },
    async (request) => {
      // int64 path parameters reach the handler as text (see validation.ts), so the conversion is exact.
      const id = parsePositiveInt64(request.params.petId as unknown as string);
      if (id === undefined) {
        throw new ApiError('invalid_request', `Invalid path: petId ${POSITIVE_INT64_PROBLEM}`, {
          details: [{ field: 'petId', problem: POSITIVE_INT64_PROBLEM }],
        });
      }
      const pet = await pets.getPet(id);
      if (!pet) throw new ApiError('not_found', `No pet with id ${id}`);
      return pet;
    },
  );
};
