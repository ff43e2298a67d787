/**
 * createPet: POST /v1/pets, with optional Idempotency-Key (IETF httpapi draft semantics): the first
 * response for a key and caller is stored with the pet, in the same transaction, and replayed for
 * 24 hours with `Idempotent-Replayed: true`; the same key with a different body is a 422; a duplicate
 * while the first is still being processed is a 409. Keys are scoped to the API key.
 */
import { createHash } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { DAY_MS, MINUTE_MS } from '../../domain/durations.ts';
import { isPositiveInt64, POSITIVE_INT64_PROBLEM } from '../../domain/int64.ts';
import { DEFAULT_PET_STATUS, nameProblem, type NewPet as NewPetValue, type Pet } from '../../domain/pet.ts';
import type { IdempotencyStore, PetStore, StoredResponse } from '../../storage/store.ts';
import { ApiError } from '../api-error.ts';
import { exactTopLevelIntegers } from '../json-body.ts';
import { COMMON_ERRORS, errors, json } from '../responses.ts';
import { NewPet, refTo } from '../schemas.ts';

/** How long a stored response is replayed. */
const IDEMPOTENCY_WINDOW_MS = DAY_MS;
/** An unfinished claim older than this belongs to a request that died; a retry may take it over. */
const CLAIM_STALE_MS = MINUTE_MS;
/** How often expired claims are deleted, by whichever request comes along first. */
const PURGE_EVERY_MS = MINUTE_MS;
const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The draft defines the header as a Structured Field string (`Idempotency-Key: "8e03978e..."`); a bare
 * token is accepted too. Both name the same key: `"abc"` and `abc` are one key.
 */
function idempotencyKeyOf(header: string): string {
  return header.length >= 2 && header.startsWith('"') && header.endsWith('"') ? header.slice(1, -1).replace(/\\([\\"])/g, '$1') : header;
}

function invalid(field: string, problem: string): ApiError {
  return new ApiError('invalid_request', `Invalid body: ${field} ${problem}`, { details: [{ field, problem }] });
}

/** The request's meaning, not its bytes: the same pet sent with other spacing or key order is the same request. */
function requestHash(pet: NewPetValue): string {
  return createHash('sha256').update(JSON.stringify([pet.name, pet.categoryId.toString(), pet.status])).digest('hex');
}

export interface CreatePetDeps {
  pets: PetStore & IdempotencyStore;
  now: () => number;
}

export const createPet: FastifyPluginAsyncTypebox<CreatePetDeps> = async (app, { pets, now }) => {
  let purgedAtMs = 0;
  /** Expired claims go at most once a minute per instance, off the request's path. */
  const purgeExpired = (nowMs: number): void => {
    if (nowMs - purgedAtMs < PURGE_EVERY_MS) return;
    purgedAtMs = nowMs;
    pets.purgeIdempotencyKeys(nowMs - IDEMPOTENCY_WINDOW_MS).catch((err: unknown) => app.log.warn({ err }, 'purging expired idempotency keys failed'));
  };
  app.post(
    '/pets',
    {
      schema: {
        operationId: 'createPet',
        summary: 'Add an animal',
        description:
          'Adds an animal and answers 201 with the created pet and its `Location`. A 201 means the pet is durably stored. The body must be `application/json`, at most 64 KiB.\n\n' +
          'Send an `Idempotency-Key` to make retries safe: the first response for that key (per API key) is stored with the pet and replayed for 24 hours with `Idempotent-Replayed: true`; the same key with a different body is a 422; a retry while the first request is still being processed is a 409.',
        tags: ['pets'],
        headers: Type.Object({
          'idempotency-key': Type.Optional(
            Type.String({
              minLength: 1,
              maxLength: 255,
              pattern: '^(?:[\\x21\\x23-\\x7E][\\x21-\\x7E]*|"(?:[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]|\\\\[\\\\"])+")$',
              description:
                'A unique value per logical create (for example a UUID): a Structured Field string as the IETF draft defines it (`"..."`), or the same text unquoted, 1 to 255 visible ASCII characters. `"abc"` and `abc` are the same key.',
            }),
          ),
        }),
        body: refTo(NewPet),
        response: {
          201: json(201, 'Pet', 'The created pet, with its assigned id (or, for a repeated Idempotency-Key, the stored first response).', {
            headers: {
              Location: { type: 'string', description: 'The created pet\'s URL, `/v1/pets/{id}`.' },
              'Idempotent-Replayed': { type: 'string', enum: ['true'], description: 'Present when this is the stored response of an earlier request with the same Idempotency-Key.' },
            },
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
      if (categoryId === undefined) throw invalid('categoryId', 'must be integer');
      if (!isPositiveInt64(categoryId)) throw invalid('categoryId', POSITIVE_INT64_PROBLEM);
      const pet: NewPetValue = { name: body.name, categoryId, status: body.status ?? DEFAULT_PET_STATUS };

      const idempotencyKey = request.headers['idempotency-key'];
      if (idempotencyKey === undefined) {
        const created = await pets.createPet(pet);
        return reply.code(201).header('Location', `/v1/pets/${created.id}`).send(created);
      }

      const scope = { keyId: request.apiKey!.id, idempotencyKey: idempotencyKeyOf(idempotencyKey) };
      const nowMs = now();
      purgeExpired(nowMs);
      const claim = await pets.claimIdempotencyKey(scope, requestHash(pet), nowMs, IDEMPOTENCY_WINDOW_MS, CLAIM_STALE_MS);
      if (claim.state === 'in_flight') {
        throw new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still being processed; retry when it has completed', {
          headers: { 'Retry-After': '1' },
        });
      }
      if (claim.state === 'mismatch') {
        throw new ApiError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request body; use a new key for a new pet');
      }
      let response: StoredResponse;
      if (claim.state === 'done') {
        response = claim.response;
        reply.header('Idempotent-Replayed', 'true');
      } else {
        reply.code(201); // so that serialize below uses the 201 response's serializer
        const render = (created: Pet): StoredResponse => ({
          status: 201,
          body: reply.serialize(created) as string,
          location: `/v1/pets/${created.id}`,
        });
        try {
          response = await pets.createPetIdempotently(scope, pet, render);
        } catch (err) {
          await pets.releaseIdempotencyKey(scope).catch(() => undefined); // unreachable storage: the claim goes stale
          throw err;
        }
      }
      return reply.code(response.status as 201).header('Location', response.location).type(JSON_TYPE).send(response.body);
    },
  );
};
