/**
 * The contract's schemas. Routes validate and serialise with them and the OpenAPI document is
 * generated from them, so they are the one source of truth for what a client sees.
 */
import { Type, type Static, type TSchema } from 'typebox';
import { CURSOR_MAX_LENGTH } from '../domain/cursor.ts';
import { INT64_MAX } from '../domain/int64.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../domain/page.ts';
import { NAME_MAX_LENGTH, PET_STATUSES } from '../domain/pet.ts';
import { ERROR_CODES, MAX_DETAILS } from './api-error.ts';

/**
 * What every int64 field says, where both people and tools read it: JavaScript numbers (and any
 * IEEE 754 double) hold integers exactly only up to 2^53 - 1. The document adds `maximum` and the
 * `x-int64-exact` extension to each int64 schema (openapi.ts), not these schemas: as a JavaScript
 * number 2^63 - 1 would be written rounded, and requests are checked exactly on their raw text.
 */
export const INT64_CAUTION =
  'Values above 2^53 - 1 (9007199254740991) occur: a JSON reader that turns numbers into IEEE 754 doubles ' +
  "(JavaScript's JSON.parse, for one) silently rounds them, so read this field as a 64-bit integer (BigInt, int64, long).";

const int64Positive = (description: string) =>
  Type.Integer({
    format: 'int64',
    minimum: 1,
    description: `${description} An integer from 1 to ${INT64_MAX}, written as a plain JSON number. ${INT64_CAUTION}`,
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

// Response objects (Pet, ErrorBody) leave `additionalProperties` open: a field added in 1.x must not
// break a client that validates what it reads. Requests stay closed (NewPet): an unknown field is a 400.

export const Pet = Type.Object(
  {
    id: int64Positive('Assigned by the service: increasing, never reused.'),
    name: Type.String({ minLength: 1, maxLength: NAME_MAX_LENGTH, description: "The animal's name, exactly as it was sent." }),
    categoryId: int64Positive('Identifier of the category the animal belongs to.'),
    status: refTo(PetStatus),
  },
  {
    $id: 'Pet',
    description: 'An animal available for adoption. Later 1.x versions may add fields: ignore those you do not know.',
    examples: [{ id: 42, name: 'Rex', categoryId: 3, status: 'available' }],
  },
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
    // No `default` keyword: generated clients would then make the field required. The service
    // applies the default itself (create-pet.ts).
    status: Type.Optional(refTo(PetStatus, { description: 'Availability status; `available` when omitted.' })),
  },
  {
    $id: 'NewPet',
    additionalProperties: false,
    description: 'An animal to add. `id` is assigned by the service; any field not listed here is refused with a 400 naming it.',
    examples: [{ name: 'Rex', categoryId: 3 }],
  },
);

export const Pets = Type.Array(refTo(Pet), {
  $id: 'Pets',
  maxItems: MAX_PAGE_SIZE,
  description: `A page of pets in ascending id order: at most the page size asked for (\`limit\`, ${MAX_PAGE_SIZE} at most).`,
});

/** The codes this version sends, each with its HTTP status: a named enumeration generated clients can list. */
export const ErrorCode = stringEnum(Object.keys(ERROR_CODES), {
  $id: 'ErrorCode',
  description:
    'The error codes of this version: ' +
    Object.entries(ERROR_CODES)
      .map(([c, s]) => `\`${c}\` (${s})`)
      .join(', ') +
    '. Later 1.x versions may add codes; a client that meets one it does not know acts on the HTTP status.',
});

export const ErrorBody = Type.Object(
  {
    // Open: a known code or any other snake_case one, so a code added in 1.x still validates.
    code: Type.Unsafe<string>({
      anyOf: [{ $ref: 'ErrorCode' }, { type: 'string', maxLength: 64, pattern: '^[a-z][a-z0-9_]*$' }],
      description: 'Machine-readable error code, snake_case: one of `ErrorCode`, or a code added in a later 1.x version.',
    }),
    message: Type.String({ maxLength: 1000, description: 'Human-readable description.' }),
    status: Type.Integer({ format: 'int32', minimum: 400, maximum: 599, description: 'The HTTP status code of the response.' }),
    details: Type.Optional(
      Type.Array(
        Type.Object({
          field: Type.String({ maxLength: 128, description: 'The field, query parameter or path parameter, e.g. `categoryId`.' }),
          problem: Type.String({ maxLength: 256, description: 'What is wrong with it.' }),
        }),
        { maxItems: MAX_DETAILS, description: `For validation errors: each field and what is wrong with it (at most ${MAX_DETAILS}).` },
      ),
    ),
    requestId: Type.Optional(
      Type.String({
        maxLength: 128,
        pattern: '^[A-Za-z0-9._:@+=/-]+$',
        description: "The request's id, also in the `X-Request-Id` response header: quote it when asking for support.",
      }),
    ),
  },
  {
    $id: 'ErrorBody',
    description:
      'The body of every error answer. Named ErrorBody rather than Error so that generated code does not shadow ' +
      "the language's own Error. Later 1.x versions may add fields: ignore those you do not know.",
    examples: [{ code: 'not_found', message: 'No pet with id 42', status: 404, requestId: '0b6c1f9e-6f1d-4c1a-9a57-0c0e2b1d4f7a' }],
  },
);

export type NewPetBody = Static<typeof NewPet>;

export const ListPetsQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      format: 'int32',
      minimum: 1,
      maximum: MAX_PAGE_SIZE,
      default: DEFAULT_PAGE_SIZE,
      description: `Page size, 1 to ${MAX_PAGE_SIZE}.`,
    }),
  ),
  status: Type.Optional(refTo(PetStatus, { description: 'Only pets with this status.' })),
  cursor: Type.Optional(
    Type.String({
      maxLength: CURSOR_MAX_LENGTH,
      description: 'Opaque position from the `Link: rel="next"` header of the previous page. Altered or malformed cursors are a 400.',
    }),
  ),
});

export const PetIdParams = Type.Object({
  petId: int64Positive('The identifier of the animal.'),
});

/** The document served at /openapi.json, as far as a client needs to know it. */
export const OpenApiDocument = Type.Object(
  {
    openapi: Type.String({ maxLength: 16, pattern: '^3\\.1\\.', description: 'The OpenAPI version: 3.1.' }),
    info: Type.Object({ version: Type.String({ maxLength: 64, description: 'The interface version.' }) }),
  },
  { $id: 'OpenApiDocument', description: 'This OpenAPI 3.1 document.' },
);

export const SHARED_SCHEMAS = [PetStatus, Pet, NewPet, Pets, ErrorCode, ErrorBody, OpenApiDocument];
