/**
 * A configuration entry (src/config.ts) and how it is read: checked against its schema, then parsed; the
 * refusal messages, the docs' wording and the Config type all derive from the entry. The schemas are three
 * JSON Schema shapes made by `Schema` and checked here. Not Ajv or env-schema: the refusals an operator reads
 * would still be worded here, and loading it costs every `petstore keys` command memory (BENCHMARKS.md).
 */

export class ConfigError extends Error {}

export type Env = Readonly<Record<string, string | undefined>>;

export interface IntegerSchema {
  readonly type: 'integer';
  readonly minimum: number;
  readonly maximum: number;
}

export interface EnumSchema<T extends string = string> {
  readonly enum: readonly T[];
}

export interface StringSchema {
  readonly type: 'string';
  readonly pattern?: string;
}

/** The kinds of raw value; integers and enums word their refusals themselves, strings through `accepts`. */
export type RawSchema = IntegerSchema | EnumSchema | StringSchema;

/** The value a raw schema admits. */
export type Static<S extends RawSchema> = S extends IntegerSchema ? number : S extends EnumSchema<infer T> ? T : string;

/** The table's schemas, written as JSON Schema. */
export const Schema = {
  Integer: (range: { minimum: number; maximum: number }): IntegerSchema => ({ type: 'integer', ...range }),
  Enum: <const T extends string>(values: readonly T[]): EnumSchema<T> => ({ enum: values }),
  String: (options: { pattern?: string } = {}): StringSchema => ({ type: 'string', ...options }),
};

const isInteger = (schema: RawSchema): schema is IntegerSchema => 'type' in schema && schema.type === 'integer';
const isEnum = (schema: RawSchema): schema is EnumSchema => 'enum' in schema;

/** The values read so far, by Config field: what a derived default is computed from. */
type Earlier = Readonly<Record<string, unknown>>;

/** Throws the entry's standard refusal, echoing `shown` (the raw value unless given) when not secret. */
export type Refuse = (shown?: string) => never;

/** A default computed from a variable read earlier in the table. */
export interface DerivedDefault<T> {
  /** The default as the README shows it (Markdown). */
  readonly shown: string;
  readonly from: (earlier: Earlier) => T;
}

export interface Variable<Field extends string = string, T = unknown, App extends boolean = boolean> {
  /** The environment variable; a pair read as one value (a certificate and its key) names both. */
  readonly names: readonly string[];
  readonly field: Field;
  readonly schema: RawSchema;
  /** As an operator would set it (a number, a string, a DerivedDefault), or undefined: unset. */
  readonly default: unknown;
  /** One line of Markdown: what the variable does, for the README. */
  readonly description: string;
  /** Whether the HTTP app (buildApp) reads it: the fields of AppConfig. */
  readonly app: App;
  /** Markdown for the README: the default, and the values accepted. */
  readonly shownDefault: string;
  readonly accepted: string;
  /** The value from the environment, checked and parsed, or the default when unset or empty. */
  read(env: Env, earlier: Earlier): T;
}

/** The value type a table entry reads. */
export type ValueOf<V> = V extends Variable<string, infer T> ? T : never;

/** The configuration a table reads: one field per entry, of the type it reads. */
export type ConfigOf<Table extends readonly Variable[]> = { [V in Table[number] as V['field']]: ValueOf<V> };

/** The fields of the entries the HTTP app reads. */
export type AppFieldOf<Table extends readonly Variable[]> = Extract<Table[number], { app: true }>['field'];

type Spec<Field extends string, Schema extends RawSchema, App extends boolean> = {
  env: string;
  field: Field;
  schema: Schema;
  description: string;
  app: App;
  /** The value may hold a password or token, so a refusal never echoes it. */
  secret?: boolean;
} & (Schema extends StringSchema
  ? {
      /** What the string accepts, as a noun phrase in Markdown: the README's column and, plain, the refusal. */
      accepts: string;
    }
  : { accepts?: undefined });

type Parse<In, Out> = (raw: In, refuse: Refuse) => Out;

/** A value that is parsed further; its default (raw, as an operator would write it) is parsed too. */
export function variable<const Field extends string, Schema extends RawSchema, const App extends boolean, Out>(
  spec: Spec<Field, Schema, App> & { default: Static<Schema>; parse: Parse<Static<Schema>, Out> },
): Variable<Field, Out, App>;
/** A value that is parsed further, unset by default: parse receives undefined then. */
export function variable<const Field extends string, Schema extends RawSchema, const App extends boolean, Out>(
  spec: Spec<Field, Schema, App> & { default: undefined; parse: Parse<Static<Schema> | undefined, Out> },
): Variable<Field, Out, App>;
/** A value the schema says everything about. */
export function variable<const Field extends string, Schema extends RawSchema, const App extends boolean>(
  spec: Spec<Field, Schema, App> & { default: Static<Schema> | DerivedDefault<Static<Schema>> },
): Variable<Field, Static<Schema>, App>;
/** A value the schema says everything about, unset by default. */
export function variable<const Field extends string, Schema extends RawSchema, const App extends boolean>(
  spec: Spec<Field, Schema, App> & { default: undefined },
): Variable<Field, Static<Schema> | undefined, App>;
export function variable(
  spec: Spec<string, RawSchema, boolean> & { default: unknown; parse?: Parse<never, unknown> },
): Variable<string, unknown, boolean> {
  // Each overload types parse by its schema; read passes only values that schema admits.
  const parse = (spec.parse ?? ((value: unknown) => value)) as Parse<unknown, unknown>;
  return {
    ...described(spec, [spec.env]),
    read(env, earlier) {
      const raw = env[spec.env];
      const refuse = refusal(spec, spec.env, raw);
      if (raw === undefined || raw === '') {
        return parse(isDerived(spec.default) ? spec.default.from(earlier) : spec.default, refuse);
      }
      return parse(checked(spec.schema, raw, refuse), refuse);
    },
  };
}

/** Two variables read as one value, each checked against the schema; parse receives both, an unset one as undefined. */
export function pair<const Field extends string, const App extends boolean, Out>(
  spec: Omit<Spec<Field, StringSchema, App>, 'env'> & {
    env: readonly [string, string];
    default: undefined;
    parse: Parse<readonly [string | undefined, string | undefined], Out>;
  },
): Variable<Field, Out, App> {
  return {
    ...described(spec, spec.env),
    read(env) {
      const [first, second] = spec.env.map((name) => {
        const raw = env[name];
        if (raw === undefined || raw === '') return undefined;
        checked(spec.schema, raw, refusal(spec, name, raw));
        return raw;
      });
      return spec.parse([first, second], refusal(spec, spec.env.join(' and '), undefined));
    },
  };
}

/** A default computed from the value of `source`, which must come earlier in the table. */
export function derived<From, T>(source: Variable<string, From>, shown: string, compute: (value: From) => T): DerivedDefault<T> {
  return {
    shown,
    from(earlier) {
      if (!(source.field in earlier)) throw new Error(`${source.names.join(', ')} must come before the variables whose default it gives`);
      return compute(earlier[source.field] as From);
    },
  };
}

/** Reads every entry of the table, in order. */
export function readTable<Table extends readonly Variable[]>(table: Table, env: Env): ConfigOf<Table> {
  const values: Record<string, unknown> = {};
  for (const entry of table) values[entry.field] = entry.read(env, values);
  return values as ConfigOf<Table>;
}

/** What the refusals and the README's columns are worded from. */
interface Wording {
  schema: RawSchema;
  accepts?: string | undefined;
  secret?: boolean | undefined;
}

function isDerived(value: unknown): value is DerivedDefault<unknown> {
  return typeof value === 'object' && value !== null && 'from' in value;
}

/** Environment text holds integers as digits only: no sign, exponent or spaces. */
function checked(schema: RawSchema, raw: string, refuse: Refuse): unknown {
  const value = isInteger(schema) && /^[0-9]+$/.test(raw) ? Number(raw) : raw;
  return conforms(schema, value) ? value : refuse();
}

/** The three kinds of schema the table uses, checked against the schema's own keywords. */
function conforms(schema: RawSchema, value: number | string): boolean {
  if (isInteger(schema)) {
    return typeof value === 'number' && Number.isSafeInteger(value) && value >= schema.minimum && value <= schema.maximum;
  }
  if (isEnum(schema)) return (schema.enum as readonly unknown[]).includes(value);
  return typeof value === 'string' && (schema.pattern === undefined || new RegExp(schema.pattern).test(value));
}

/** A refusal names the variable and what it must be; a non-secret one shows what it got. */
function refusal(spec: Wording, name: string, raw: string | undefined): Refuse {
  const schema = spec.schema;
  let must: string;
  if (isInteger(schema)) must = `an integer from ${schema.minimum} to ${schema.maximum}`;
  else if (isEnum(schema)) must = `one of ${schema.enum.join(', ')}`;
  else must = (spec.accepts ?? '').replaceAll('`', '');
  return (shown = raw) => {
    throw new ConfigError(`${name} must be ${must}${spec.secret || shown === undefined ? '' : `, got "${shown}"`}`);
  };
}

function described<Field extends string, App extends boolean>(
  spec: Wording & { field: Field; app: App; description: string; default: unknown },
  names: readonly string[],
): Omit<Variable<Field, unknown, App>, 'read'> {
  const schema = spec.schema;
  let accepted: string;
  if (isInteger(schema)) accepted = `${schema.minimum} to ${schema.maximum}`;
  else if (isEnum(schema)) accepted = schema.enum.map((v) => `\`${v}\``).join(', ');
  else accepted = spec.accepts ?? '';
  const given = spec.default;
  const shownDefault = given === undefined ? 'unset' : isDerived(given) ? given.shown : `\`${String(given)}\``;
  return { names, field: spec.field, schema, default: given, description: spec.description, app: spec.app, shownDefault, accepted };
}
