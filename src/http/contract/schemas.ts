/**
 * The contract's schemas. Routes validate and serialise with them and the OpenAPI document is
 * generated from them, so they are the one source of truth for what a client sees.
 *
 * They are written as plain JSON Schema objects, each given its TypeBox type, so that handlers are
 * typed from the schema they validate with, while TypeBox itself (a type-only import here) is never
 * loaded by the server: importing it costs every process about 16 MiB of memory for what are ten
 * object literals. The literals are what TypeBox built before (openapi.json came out byte-identical),
 * and test/http/openapi.test.ts holds the document to them.
 */
import type { Static, TArray, TInteger, TObject, TOptional, TSchema, TString, TUnsafe } from 'typebox';
import { CURSOR_MAX_LENGTH } from '../../domain/cursor.ts';
import { INT64_MAX } from '../../domain/int64.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../../domain/page.ts';
import { NAME_MAX_LENGTH, PET_STATUSES } from '../../domain/pet.ts';
import { ERROR_CODES, MAX_DETAILS } from './api-error.ts';

/**
 * What every int64 field says, where both people and tools read it: JavaScript numbers (and any
 * IEEE 754 double) hold integers exactly only up to 2^53 - 1. The range is stated in words, with no
 * numeric `maximum` (2^63 - 1 is no double: every reader of the document would show it rounded);
 * the document adds the `x-int64-exact` extension (openapi.ts), and requests are checked exactly on
 * their raw text.
 */
export const INT64_CAUTION =
  'Values above 2^53 - 1 (9007199254740991) occur: a JSON reader that turns numbers into IEEE 754 doubles ' +
  "(JavaScript's JSON.parse, for one) silently rounds them, so read this field as a 64-bit integer (BigInt, int64, long).";

type Options = Record<string, unknown>;

/** Property names of an object schema's properties that are not optional, as TypeBox lists them. */
function requiredOf(properties: Record<string, unknown>): string[] {
  return Object.keys(properties).filter((name) => !optional.has(properties[name] as object));
}

/** Schemas marked optional in an object: a mark kept beside them, so the literal stays plain JSON. */
const optional = new WeakSet<object>();

const Optional = <T extends TSchema>(schema: T): TOptional<T> => (optional.add(schema), schema as TOptional<T>);

const Integer = (options: Options): TInteger => ({ type: 'integer', ...options }) as unknown as TInteger;

const Text = (options: Options = {}): TString => ({ type: 'string', ...options }) as unknown as TString;

function Obj<P extends Record<string, TSchema>>(properties: P, options: Options = {}): TObject<P> {
  const required = requiredOf(properties);
  return { type: 'object', ...(required.length ? { required } : {}), properties, ...options } as unknown as TObject<P>;
}

const List = <T extends TSchema>(items: T, options: Options = {}): TArray<T> =>
  ({ type: 'array', items, ...options }) as unknown as TArray<T>;

/** A schema written as it is, typed as T. */
const Unsafe = <T>(schema: Options): TUnsafe<T> => schema as unknown as TUnsafe<T>;

/** A name is not only white space. */
const NOT_ONLY_WHITE_SPACE = '\\S';
/** An Idempotency-Key: a Structured Field string, or the same text unquoted. */
const IDEMPOTENCY_KEY = '^(?:[\\x21\\x23-\\x7E][\\x21-\\x7E]*|"(?:[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]|\\\\[\\\\"])+")$';

/** What a client is told when a value does not match a request schema's pattern (validation-details.ts). */
export const PATTERN_PROBLEMS: Record<string, string> = {
  [NOT_ONLY_WHITE_SPACE]: 'must not be only white space',
  [IDEMPOTENCY_KEY]: 'must be visible ASCII characters without spaces, or a double-quoted string',
};

const int64Positive = (description: string) =>
  Integer({
    format: 'int64',
    minimum: 1,
    description: `${description} An integer from 1 to ${INT64_MAX}, written as a plain JSON number. ${INT64_CAUTION}`,
  });

/** A string enumeration written the plain OpenAPI way (`enum`). */
const stringEnum = <T extends string>(values: readonly T[], options: Options = {}) =>
  Unsafe<T>({ type: 'string', enum: [...values], ...options });

/** A `$ref` to a named shared schema that keeps the referenced schema's static type, so handlers see the fields they validate. */
export function refTo<T extends TSchema>(schema: T, options: Options = {}): TUnsafe<Static<T>> {
  const id = (schema as { $id?: unknown }).$id;
  if (typeof id !== 'string') throw new Error('refTo: the schema has no $id');
  return Unsafe<Static<T>>({ $ref: id, ...options });
}

// No description of its own: each field that refers to it says what the status means there (a pet's,
// the default on create, the filter), and a renderer shows a referred schema's description beside the
// field's, twice over.
export const PetStatus = stringEnum(PET_STATUSES, { $id: 'PetStatus' });

// Response objects (Pet, ErrorBody) leave `additionalProperties` open: a field added in 1.x must not
// break a client that validates what it reads. Requests stay closed (NewPet): an unknown field is a 400.

export const Pet = Obj(
  {
    id: int64Positive('Assigned by the service: increasing, never reused.'),
    name: Text({ minLength: 1, maxLength: NAME_MAX_LENGTH, description: "The animal's name, exactly as it was sent." }),
    categoryId: int64Positive('Identifier of the category the animal belongs to.'),
    status: refTo(PetStatus, { description: 'Availability status.' }),
  },
  {
    $id: 'Pet',
    description: 'An animal available for adoption. Later 1.x versions may add fields: ignore those you do not know.',
    examples: [{ id: 42, name: 'Rex', categoryId: 3, status: 'available' }],
  },
);

export const NewPet = Obj(
  {
    name: Text({
      minLength: 1,
      maxLength: NAME_MAX_LENGTH,
      pattern: NOT_ONLY_WHITE_SPACE,
      description:
        'From 1 to 100 characters, not only white space; stored exactly as sent (no trimming). NUL characters ' +
        'and unpaired surrogates are refused.',
    }),
    categoryId: int64Positive('Identifier of the category the animal belongs to.'),
    // No `default` keyword: generated clients would then make the field required. The service
    // applies the default itself (create-pet.ts).
    status: Optional(refTo(PetStatus, { description: 'Availability status; `available` when omitted.' })),
  },
  {
    $id: 'NewPet',
    additionalProperties: false,
    description: 'An animal to add. `id` is assigned by the service; any field not listed here is refused with a 400 naming it.',
    examples: [{ name: 'Rex', categoryId: 3 }],
  },
);

export const Pets = List(refTo(Pet), {
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

export const ErrorBody = Obj(
  {
    // Open: a known code or any other snake_case one, so a code added in 1.x still validates.
    code: Unsafe<string>({
      anyOf: [{ $ref: 'ErrorCode' }, { type: 'string', maxLength: 64, pattern: '^[a-z][a-z0-9_]*$' }],
      description: 'Machine-readable error code, snake_case: one of `ErrorCode`, or a code added in a later 1.x version.',
    }),
    message: Text({ maxLength: 1000, description: 'Human-readable description.' }),
    status: Integer({ format: 'int32', minimum: 400, maximum: 599, description: 'The HTTP status code of the response.' }),
    details: Optional(
      List(
        Obj({
          field: Text({ maxLength: 128, description: 'The field, query parameter or path parameter, e.g. `categoryId`.' }),
          problem: Text({ maxLength: 256, description: 'What is wrong with it.' }),
        }),
        { maxItems: MAX_DETAILS, description: `For validation errors: each field and what is wrong with it (at most ${MAX_DETAILS}).` },
      ),
    ),
    requestId: Optional(
      Text({
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

export const ListPetsQuery = Obj({
  limit: Optional(
    Integer({
      format: 'int32',
      minimum: 1,
      maximum: MAX_PAGE_SIZE,
      default: DEFAULT_PAGE_SIZE,
      description: `Page size, 1 to ${MAX_PAGE_SIZE}; ${DEFAULT_PAGE_SIZE} when omitted.`,
    }),
  ),
  status: Optional(refTo(PetStatus, { description: 'Only pets with this status.' })),
  cursor: Optional(
    Text({
      maxLength: CURSOR_MAX_LENGTH,
      description: 'Opaque position from the `Link: rel="next"` header of the previous page. Altered or malformed cursors are a 400.',
    }),
  ),
});

/** createPet's request headers: the optional Idempotency-Key. */
export const CreatePetHeaders = Obj({
  'idempotency-key': Optional(
    Text({
      minLength: 1,
      maxLength: 255,
      pattern: IDEMPOTENCY_KEY,
      description:
        'A unique value per logical create (for example a UUID): a Structured Field string as the IETF draft defines it ' +
        '(`"..."`), or the same text unquoted, 1 to 255 visible ASCII characters. `"abc"` and `abc` are the same key.',
    }),
  ),
});

export const PetIdParams = Obj({
  petId: int64Positive('The identifier of the animal.'),
});

export const SHARED_SCHEMAS = [PetStatus, Pet, NewPet, Pets, ErrorCode, ErrorBody];
