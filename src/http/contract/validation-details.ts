/**
 * What a client is told about a request the schemas refuse: one detail per field, in the service's own
 * words. Ajv's messages name schema keywords ("must NOT have fewer than 1 characters", "must match
 * pattern" followed by the regular expression) and never reach a client: the words come from the
 * error's keyword and the schema that failed (Ajv's `verbose` errors carry it as `parentSchema`), so a
 * limit changed in a schema changes what clients read with it.
 */
import { INT64_MAX, POSITIVE_INT64_PROBLEM } from '../../domain/int64.ts';
import { clip, MAX_DETAILS, type ErrorDetail } from './api-error.ts';
import { PATTERN_PROBLEMS } from './schemas.ts';

/** The parts of an Ajv error (with `verbose`) that the words are made from. */
export interface SchemaError {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  parentSchema?: Record<string, unknown>;
}

/** The largest value of an integer format, where the schema states no `maximum` (int64's is no double). */
const FORMAT_MAXIMUM: Record<string, bigint> = { int32: 2147483647n, int64: INT64_MAX };

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
  object: 'a JSON object',
  array: 'an array',
  null: 'null',
};

/** An integer schema's range, as the int64 rule words it (`must be an integer from 1 to ...`). */
function integerProblem(schema: Record<string, unknown>): string {
  // The ids: in the rule's own words, which the handlers use for what the schema cannot check.
  if (schema.format === 'int64' && schema.minimum === 1 && schema.maximum === undefined) return POSITIVE_INT64_PROBLEM;
  const min = schema.minimum;
  const max = schema.maximum ?? FORMAT_MAXIMUM[String(schema.format)];
  if (min !== undefined && max !== undefined) return `must be an integer from ${min} to ${max}`;
  if (min !== undefined) return `must be an integer of at least ${min}`;
  if (max !== undefined) return `must be an integer of at most ${max}`;
  return 'must be an integer';
}

function lengthProblem(schema: Record<string, unknown>): string {
  const { minLength: min, maxLength: max } = schema;
  if (min !== undefined && max !== undefined) return `must be ${min} to ${max} characters long`;
  if (max !== undefined) return `must be at most ${max} characters long`;
  return min === 1 ? 'must not be empty' : `must be at least ${min} characters long`;
}

function problemOf(error: SchemaError): string {
  const schema = error.parentSchema ?? {};
  if (error.keyword === 'required') return 'is required';
  if (error.keyword === 'additionalProperties') return 'is not a field of this resource';
  // An enumeration's values say it all, whatever failed first (`null` fails `type` before `enum`).
  if (Array.isArray(schema.enum)) return `must be one of ${schema.enum.join(', ')}`;
  if (schema.type === 'integer') return integerProblem(schema);
  switch (error.keyword) {
    case 'type':
      return `must be ${TYPE_NAMES[String(error.params.type)] ?? String(error.params.type)}`;
    case 'minLength':
    case 'maxLength':
      return lengthProblem(schema);
    case 'pattern':
      return PATTERN_PROBLEMS[String(error.params.pattern)] ?? 'is not in the form this field takes';
    case 'minimum':
      return `must be at least ${error.params.limit}`;
    case 'maximum':
      return `must be at most ${error.params.limit}`;
    default:
      return 'is not a value this field takes';
  }
}

const joinField = (parent: string, child: string): string => (parent ? `${parent}.${child}` : child);

function fieldOf(error: SchemaError, part: string): string {
  const path = error.instancePath.replace(/^\//, '').replaceAll('/', '.');
  if (error.keyword === 'required') return joinField(path, String(error.params.missingProperty));
  if (error.keyword === 'additionalProperties') return joinField(path, String(error.params.additionalProperty));
  return path || part;
}

/**
 * Each field the schema refused and what is wrong with it, in the order found; a field refused on
 * several counts (an empty name is also only white space) is named once, for the first.
 */
export function validationDetails(errors: readonly SchemaError[], part: string): ErrorDetail[] {
  const details = new Map<string, string>();
  for (const error of errors) {
    const field = fieldOf(error, part);
    if (!details.has(field)) details.set(field, problemOf(error));
  }
  return [...details].map(([field, problem]) => ({ field, problem }));
}

/** The message of a schema refusal: the first three details, and how many more there are. */
export function validationMessage(details: readonly ErrorDetail[], part: string): string {
  const summary = details
    .slice(0, 3)
    .map((d) => `${clip(d.field)} ${d.problem}`)
    .join('; ');
  const more =
    details.length > 3
      ? ` (and ${details.length - 3} more${details.length > MAX_DETAILS ? `; the first ${MAX_DETAILS} are in details` : ''})`
      : '';
  return `Invalid ${part}: ${summary}${more}`;
}
