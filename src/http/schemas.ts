/**
 * The contract's schemas. Routes validate and serialise with them and the OpenAPI document is
 * generated from them, so they are the one source of truth for what a client sees.
 */
import { Type, type Static, type TSchema } from 'typebox';
import { INT64_MAX } from '../domain/int64.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../domain/page.ts';
import { NAME_MAX_LENGTH, PET_STATUSES } from '../domain/pet.ts';
import { ERROR_CODES } from './api-error.ts';

const int64Positive = (description: string) =>
  Type.Integer({
    format: 'int64',
    minimum: 1,
    description:
      `${description} An integer from 1 to ${INT64_MAX}, written as a plain JSON number; every value in ` +
      `that range round-trips exactly.`,
  });

/** A string enumeration written the plain OpenAPI way (`enum`) rather than TypeBox's anyOf of consts. */
const stringEnum = <T extends string>(values: readonly T[], options: Record<string, unknown> = {}) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...options });

/**
 * A `$ref` to a named shared schema that keeps the referenced schema's static type, so handlers see
 * the fields they validate (a bare `Type.Ref` is typed `unknown` outside a TypeBox module).
 */
export function refTo<T extends TSchema>(schema: T, options: Record<string, unknown> = {}) {
  const id = (schema as { $id?: unknown }).$id;
  if (typeof id !== 'string') throw new Error('refTo: the schema has no $id');
  return Type.Unsafe<Static<T>>(Type.Ref(id, options));
}

export const PetStatus = stringEnum(PET_STATUSES, { $id: 'PetStatus', description: 'Availability status.' });

export const Pet = Type.Object(
  {
    id: Type.Integer({ format: 'int64', minimum: 1, description: 'Assigned by the service: increasing, never reused.' }),
    name: Type.String({ minLength: 1, maxLength: NAME_MAX_LENGTH, description: "The animal's name, exactly as it was sent." }),
    categoryId: int64Positive('Identifier of the category the animal belongs to.'),
    status: refTo(PetStatus),
  },
  { $id: 'Pet', additionalProperties: false },
);

export const NewPet = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: NAME_MAX_LENGTH,
      pattern: '\\S',
      description:
        'From 1 to 100 characters, not only white space; stored exactly as sent (no trimming). NUL characters ' +
        'and unpaired surrogates are refused.',
    }),
    categoryId: int64Positive('Identifier of the category the animal belongs to.'),
    status: Type.Optional(
      // No `default` keyword: generated clients would then make the field required. The service
      // applies the default itself (create-pet.ts).
      stringEnum(PET_STATUSES, { description: 'Availability status; `available` when omitted.' }),
    ),
  },
  {
    $id: 'NewPet',
    additionalProperties: false,
    description: 'An animal to add. `id` is assigned by the service; any field not listed here is refused with a 400 naming it.',
  },
);

export const Pets = Type.Array(refTo(Pet), { $id: 'Pets', description: 'A page of pets in ascending id order.' });

export const ErrorBody = Type.Object(
  {
    code: stringEnum(Object.keys(ERROR_CODES), {
      description:
        'Machine-readable error code: ' +
        Object.entries(ERROR_CODES)
          .map(([c, s]) => `\`${c}\` (${s})`)
          .join(', ') +
        '.',
    }),
    message: Type.String({ description: 'Human-readable description.' }),
    status: Type.Integer({ description: 'The HTTP status code of the response.' }),
    details: Type.Optional(
      Type.Array(Type.Object({ field: Type.String(), problem: Type.String() }, { additionalProperties: false }), {
        description: 'For validation errors: each field and what is wrong with it.',
      }),
    ),
    requestId: Type.Optional(
      Type.String({ description: "The request's id, also in the `X-Request-Id` response header: quote it when asking for support." }),
    ),
  },
  { $id: 'Error', additionalProperties: false },
);

export type NewPetBody = Static<typeof NewPet>;

export const ListPetsQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, default: DEFAULT_PAGE_SIZE, description: `Page size, 1 to ${MAX_PAGE_SIZE}.` }),
  ),
  status: Type.Optional(refTo(PetStatus, { description: 'Only pets with this status.' })),
  cursor: Type.Optional(
    Type.String({
      description: 'Opaque position from the `Link: rel="next"` header of the previous page. Altered or malformed cursors are a 400.',
    }),
  ),
});

export const PetIdParams = Type.Object({
  petId: Type.Integer({ format: 'int64', minimum: 1, description: 'The identifier of the animal: a positive int64.' }),
});

export const SHARED_SCHEMAS = [PetStatus, Pet, NewPet, Pets, ErrorBody];
