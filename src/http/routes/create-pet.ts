/** createPet: POST /v1/pets. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { DEFAULT_PET_STATUS, isPositiveInt64, nameProblem } from '../../domain/pet.js';
import type { PetStore } from '../../storage/store.js';
import { ApiError } from '../errors.js';
import { COMMON_ERRORS, errors, json } from '../responses.js';
import { NewPet } from '../schemas.js';

function invalid(field: string, problem: string): ApiError {
  return new ApiError('invalid_request', `Invalid body: ${field} ${problem}`, [{ field, problem }]);
}

export const createPet: FastifyPluginAsyncTypebox<{ pets: PetStore }> = async (app, { pets }) => {
  app.post(
    '/v1/pets',
    {
      schema: {
        operationId: 'createPet',
        summary: 'Add an animal',
        description:
          'Adds an animal and answers 201 with the created pet and its `Location`. A 201 means the pet is durably stored. The body must be `application/json`, at most 64 KiB.',
        tags: ['pets'],
        body: Type.Ref(NewPet),
        response: {
          201: json(201, 'Pet', 'The created pet, with its assigned id.', {
            headers: { Location: { type: 'string', description: 'The created pet\'s URL, `/v1/pets/{id}`.' } },
          }),
          ...errors([400, 413, 415, ...COMMON_ERRORS]),
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const problem = nameProblem(body.name);
      if (problem) throw invalid('name', problem);
      // The schema checked the shape with a rounded number; the exact value comes from the raw text.
      const categoryId = request.exactIntegers?.get('categoryId');
      if (categoryId === undefined) throw invalid('categoryId', 'must be integer');
      if (!isPositiveInt64(categoryId)) throw invalid('categoryId', 'must be from 1 to 9223372036854775807');
      const pet = await pets.createPet({ name: body.name, categoryId, status: body.status ?? DEFAULT_PET_STATUS });
      return reply.code(201).header('Location', `/v1/pets/${pet.id}`).send(pet);
    },
  );
};
