/**
 * Ajv, two ways: bodies strictly (no coercion, no silent removal of unknown fields, so a mistake is a 400
 * naming the field); query and path integers coerced from plain decimal digits only (not "1e1", "0x10" or
 * " 5"), int64 ones left as text for the handler to convert exactly.
 */
import { Ajv2020, type Options } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, FastifySchemaValidationError } from 'fastify';
import fp from 'fastify-plugin';
import { SHARED_SCHEMAS } from '../contract/schemas.ts';

// ajv-formats is CommonJS: under NodeNext its ES default export is the `default` property.
const addFormats = addFormatsModule.default;

function makeAjv(options: Options): Ajv2020 {
  // verbose: each error carries the schema that failed, from which a client is told the problem in the
  // service's words (contract/validation-details.ts); only refusals build it.
  const ajv = new Ajv2020({ strict: true, allErrors: true, verbose: true, useDefaults: true, removeAdditional: false, ...options });
  addFormats(ajv);
  for (const schema of SHARED_SCHEMAS) ajv.addSchema(schema);
  return ajv;
}

type JsonSchema = Record<string, unknown>;

/** A copy of a schema in which every int64 integer stays text, for the handler to parse exactly. */
function int64AsText(schema: JsonSchema): JsonSchema {
  if (schema.type === 'integer' && schema.format === 'int64') return { type: 'string' };
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(schema)) {
    out[k] = v !== null && typeof v === 'object' && !Array.isArray(v) ? int64AsText(v as JsonSchema) : v;
  }
  return out;
}

/** The validator compiler and the shared schemas, before any route is registered: routes compile against them. */
export const validation = fp(
  async (app: FastifyInstance) => {
    for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
    const bodyAjv = makeAjv({ coerceTypes: false });
    const textAjv = makeAjv({ coerceTypes: 'array' });
    app.setValidatorCompiler(({ schema, httpPart }) => {
      if (httpPart === 'body') return bodyAjv.compile(schema);
      const textSchema = int64AsText(schema as JsonSchema);
      return decimalIntegersOnly(textSchema, textAjv.compile(textSchema));
    });
  },
  { name: 'validation' },
);

/** Ajv's errors with `verbose`: each carries the schema that failed. */
type Validate = ((data: unknown) => boolean) & { errors?: (FastifySchemaValidationError & { parentSchema?: JsonSchema })[] | null };

/** Refuses integer parameters that are not plain decimal digits, then runs the schema's validation. */
function decimalIntegersOnly(schema: JsonSchema, validate: Validate): Validate {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const integers = Object.keys(properties).filter((k) => properties[k]!.type === 'integer');
  const checked: Validate = (data) => {
    const values = data as Record<string, unknown>;
    for (const name of integers) {
      const value = values[name];
      if (typeof value === 'string' && !/^-?[0-9]{1,16}$/.test(value)) {
        checked.errors = [
          {
            instancePath: `/${name}`,
            schemaPath: `#/properties/${name}/type`,
            keyword: 'type',
            params: { type: 'integer' },
            parentSchema: properties[name],
          },
        ];
        return false;
      }
    }
    const valid = validate(data);
    checked.errors = validate.errors;
    return valid;
  };
  return checked;
}
