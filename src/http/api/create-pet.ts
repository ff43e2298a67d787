/**
 * createPet: POST /v1/pets with an optional Idempotency-Key. The rules are the IdempotentCreates service's
 * (docs/decisions.md, "Idempotency-Key"); this route parses the request and writes the answer.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { isPositiveInt64, POSITIVE_INT64_PROBLEM } from '../../domain/int64.ts';
import { petJson } from '../../domain/pet-json.ts';
import { DEFAULT_PET_STATUS, nameProblem, type NewPet as NewPetValue, type Pet } from '../../domain/pet.ts';
import type { IdempotentCreates } from '../../services/idempotent-creates.ts';
import { CreateOutcomeUnknownError } from '../../storage/errors.ts';
import type { PetStore } from '../../storage/store.ts';
import { ApiError } from '../contract/api-error.ts';
import { JSON_TYPE } from '../answers/representation.ts';
import { exactTopLevelIntegers } from '../hooks/json-bodies.ts';
import { COMMON_ERRORS, errors, json } from '../contract/responses.ts';
import { CreatePetHeaders, NewPet, refTo } from '../contract/schemas.ts';

/**
 * The draft defines the header as a Structured Field string (`Idempotency-Key: "8e03978e..."`); a bare
 * token is accepted too. Both name the same key: `"abc"` and `abc` are one key.
 */
function idempotencyKeyOf(header: string): string {
  return header.length >= 2 && header.startsWith('"') && header.endsWith('"') ? header.slice(1, -1).replace(/\\([\\"])/g, '$1') : header;
}

/**
 * The 503 of a create without an Idempotency-Key whose statement may still have committed: the client
 * is told so, and how to create safely. The cause stays for the log.
 */
function mayHaveBeenStored(err: CreateOutcomeUnknownError): ApiError {
  const answer = new ApiError(
    'unavailable',
    'The service is temporarily unavailable; the pet may have been stored. Send an Idempotency-Key to retry a create safely',
    { headers: { 'Retry-After': '2' } },
  );
  answer.cause = err.cause;
  return answer;
}

function invalid(field: string, problem: string): ApiError {
  return new ApiError('invalid_request', `Invalid body: ${field} ${problem}`, { details: [{ field, problem }] });
}

export interface CreatePetDeps {
  pets: PetStore;
  creates: IdempotentCreates;
  /** The API's base URL as clients reach it (PUBLIC_BASE_URL): a created pet's Location starts with it. */
  publicBaseUrl: string;
}

export const createPet: FastifyPluginAsyncTypebox<CreatePetDeps> = async (app, { pets, creates, publicBaseUrl }) => {
  /** The 201 with the pet, its Location and its JSON, written by the one mapping the other operations use. */
  const created = (reply: FastifyReply, pet: Pet): FastifyReply =>
    reply.code(201).header('Location', `${publicBaseUrl}/pets/${pet.id}`).type(JSON_TYPE).send(petJson(pet));

  app.post(
    '/pets',
    {
      schema: {
        operationId: 'createPet',
        summary: 'Add an animal',
        description:
          'Adds an animal and answers 201 with the created pet and its `Location`. A 201 means the pet is durably stored. ' +
          'The body must be `application/json`, at most 64 KiB.\n\n' +
          'Send an `Idempotency-Key` to make retries safe: the first response for that key (per API key) is stored with the pet ' +
          'and replayed for 24 hours with `Idempotent-Replayed: true`; the same key with a different body is a 422; ' +
          'a retry while the first request is still being processed is a 409. ' +
          'A 503 to a create without an `Idempotency-Key` can leave the pet stored when storage stopped answering mid-create ' +
          '(its message says so); with a key, a retry finds that pet or creates it.',
        tags: ['pets'],
        headers: CreatePetHeaders,
        body: refTo(NewPet),
        response: {
          201: json(201, 'Pet', 'The created pet, with its assigned id (or, for a repeated Idempotency-Key, the stored first response).', {
            headers: ['Location', 'Idempotent-Replayed'],
          }),
          ...errors([400, 409, 413, 415, 422, ...COMMON_ERRORS]),
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const problem = nameProblem(body.name);
      if (problem) throw invalid('name', problem);
      // The schema checked the shape with a rounded number; the exact value comes from the raw text.
      const categoryId = exactTopLevelIntegers(request.jsonText!).get('categoryId');
      if (categoryId === undefined) throw invalid('categoryId', POSITIVE_INT64_PROBLEM);
      if (!isPositiveInt64(categoryId)) throw invalid('categoryId', POSITIVE_INT64_PROBLEM);
      const pet: NewPetValue = { name: body.name, categoryId, status: body.status ?? DEFAULT_PET_STATUS };

      const idempotencyKey = request.headers['idempotency-key'];
      if (idempotencyKey === undefined) {
        try {
          return created(reply, await pets.createPet(pet));
        } catch (err) {
          throw err instanceof CreateOutcomeUnknownError ? mayHaveBeenStored(err) : err;
        }
      }

      // Scoped to the key's subject: a retry sent with the key that replaced it (rotation) finds the same claim.
      const result = await creates.create({ keyId: request.apiKey!.subjectId, idempotencyKey: idempotencyKeyOf(idempotencyKey) }, pet);
      switch (result.outcome) {
        case 'in_flight':
          throw new ApiError(
            'idempotency_key_in_use',
            'A request with this Idempotency-Key is still being processed; retry when it has completed',
            // By then the first request has finished, or its key may be taken over by the retry.
            { headers: { 'Retry-After': String(Math.max(1, Math.ceil(result.retryInMs / 1000))) } },
          );
        case 'mismatch':
          throw new ApiError(
            'idempotency_key_reused',
            'This Idempotency-Key was already used with a different request body; use a new key for a new pet',
          );
        case 'replayed':
          return created(reply.header('Idempotent-Replayed', 'true'), result.pet);
        case 'created':
          return created(reply, result.pet);
      }
    },
  );
};
