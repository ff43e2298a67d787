/**
 * Schema validation with Ajv, two ways:
 * - bodies are checked strictly: no type coercion ("5" is not an integer) and no silent removal of
 *   unknown fields, so a client's mistake is a 400 that names the field;
 * - query strings and path parameters are text by nature, so their numbers are coerced, except int64
 *   ones, which are checked as decimal text and converted exactly by the handler (a JavaScript number
 *   would round anything above 2^53).
 */
import { Ajv2020, type Options } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { SHARED_SCHEMAS } from './schemas.js';

// ajv-formats is CommonJS: under NodeNext its ES default export is the `default` property.
const addFormats = addFormatsModule.default;

function makeAjv(options: Options): Ajv2020 {
  const ajv = new Ajv2020({ strict: true, allErrors: true, useDefaults: true, removeAdditional: false, ...options });
  addFormats(ajv);
  for (const schema of SHARED_SCHEMAS) ajv.addSchema(schema);
  return ajv;
}

type JsonSchema = Record<string, unknown>;

/** A copy of a schema in which every int64 integer is validated as positive decimal text instead. */
function int64AsText(schema: JsonSchema): JsonSchema {
  if (schema.type === 'integer' && schema.format === 'int64') {
    return { type: 'string', pattern: '^[0-9]{1,25}$' };
  }
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(schema)) {
    out[k] = v !== null && typeof v === 'object' && !Array.isArray(v) ? int64AsText(v as JsonSchema) : v;
  }
  return out;
}

export function installValidation(app: FastifyInstance): void {
  const bodyAjv = makeAjv({ coerceTypes: false });
  const textAjv = makeAjv({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart === 'body') return bodyAjv.compile(schema);
    return textAjv.compile(int64AsText(schema as JsonSchema));
  });
}

