/**
 * What an entry of the configuration table (src/config.ts) is made of, and how it is read: the raw
 * text is checked against the entry's TypeBox schema, then parsed when the entry says how. The
 * refusal messages and the README's wording of what is accepted are derived from the same schema, and
 * the Config type from the table itself, so a variable is written down once.
 */
import { Type, type Static, type TEnum, type TInteger, type TNumberOptions, type TString } from 'typebox';

export class ConfigError extends Error {}

export type Env = Readonly<Record<string, string | undefined>>;

/** The kinds of raw value; integers and enums word their refusals themselves, strings through `accepts`. */
export type RawSchema = TInteger | TEnum<string[]> | TString;

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
} & (Schema extends TString
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
  spec: Spec<string, RawSchema, boolean> & { default: unknown; parse?: Parse<unknown, unknown> },
): Variable<string, unknown, boolean> {
  const parse = spec.parse ?? ((value: unknown) => value);
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
  spec: Omit<Spec<Field, TString, App>, 'env'> & {
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
  const value = Type.IsInteger(schema) && /^[0-9]+$/.test(raw) ? Number(raw) : raw;
  return conforms(schema, value) ? value : refuse();
}

/**
 * The three kinds of schema the table uses, checked against the schema's own keywords. TypeBox's
 * general checker (typebox/value) would do the same for about 8 MiB more in every process.
 */
function conforms(schema: RawSchema, value: number | string): boolean {
  if (Type.IsInteger(schema)) {
    const { min, max } = range(schema);
    return typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max;
  }
  if (Type.IsEnum(schema)) return (schema.enum as unknown[]).includes(value);
  const { pattern } = schema as TString & { pattern?: string };
  return typeof value === 'string' && (pattern === undefined || new RegExp(pattern).test(value));
}

function range(schema: TInteger): { min: number; max: number } {
  const { minimum, maximum } = schema as TInteger & TNumberOptions;
  return { min: Number(minimum ?? 0), max: Number(maximum ?? Number.MAX_SAFE_INTEGER) };
}

/** A refusal names the variable and what it must be; a non-secret one shows what it got. */
function refusal(spec: Wording, name: string, raw: string | undefined): Refuse {
  const schema = spec.schema;
  let must: string;
  if (Type.IsInteger(schema)) must = `an integer from ${range(schema).min} to ${range(schema).max}`;
  else if (Type.IsEnum(schema)) must = `one of ${schema.enum.join(', ')}`;
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
  if (Type.IsInteger(schema)) accepted = `${range(schema).min} to ${range(schema).max}`;
  else if (Type.IsEnum(schema)) accepted = schema.enum.map((v) => `\`${v}\``).join(', ');
  else accepted = spec.accepts ?? '';
  const given = spec.default;
  const shownDefault = given === undefined ? 'unset' : isDerived(given) ? given.shown : `\`${String(given)}\``;
  return { names, field: spec.field, schema, default: given, description: spec.description, app: spec.app, shownDefault, accepted };
}
