#!/usr/bin/env node
/**
 * The operator's command line: `petstore serve`, `petstore migrate`, `petstore keys
 * create|list|rotate|plan|expire|revoke|unban`, and `petstore backup|restore FILE` (`petstore backup --verify
 * FILE` checks a backup). Reads the same environment as the server (DATABASE_URL, PETSTORE_ENV, ...); the
 * `keys` commands apply missing migrations as a start does, or refuse the database with MIGRATIONS=refuse.
 *
 * A key is created in well under a second because each command loads only what it uses: this file
 * imports nothing heavier than the command table; the configuration, the storage engine that
 * DATABASE_URL names and, for `serve` only, the server (Fastify and everything under it) are loaded
 * when a command needs them, and tracing (OpenTelemetry) only when `serve` runs with
 * OTEL_EXPORTER_OTLP_ENDPOINT set. `--help` and `--version` read neither configuration nor storage.
 *
 * Node.js flags are not set here: `npm start` passes what the server needs (docs/operations.md).
 */
import { parseArgs } from 'node:util';
import type * as ConfigModule from '../config.ts';
import type { Config, ConfigError } from '../config.ts';
import type { MigrationOptions, MigrationOutcome } from '../storage/migration-mode.ts';
import type { OpenOptions } from '../storage/open.ts';
import type { Store } from '../storage/store.ts';
import { packageVersion } from '../version.ts';
import { COMMANDS, commandHelp, GROUPS, groupHelp, mainHelp, type CommandSpec } from './commands.ts';
import { StateError, UsageError } from './errors.ts';
import { jsonLine, printable } from './printable.ts';

type Values = Readonly<Record<string, string | boolean | undefined>>;

/** Set once the configuration module is loaded: before that, no error can be one of its. */
let configErrorClass: typeof ConfigError | undefined;

const seeHelp = (spec: CommandSpec | string) => `see petstore ${typeof spec === 'string' ? spec : spec.name} --help`;

interface Parsed {
  help: boolean;
  values: Values;
  args: string[];
}

/**
 * The command's flags and arguments, against what its table entry lists: anything else (a flag of
 * another command, a flag without its value, an argument too many) is a UsageError naming it.
 * `--help` anywhere wins, so that it always works, whatever else was typed.
 */
function parseCommandLine(spec: CommandSpec, argv: string[]): Parsed {
  const options = Object.fromEntries(Object.entries(spec.options).map(([name, o]) => [name, { type: o.type }]));
  const { tokens } = parseArgs({
    args: argv,
    options: { ...options, help: { type: 'boolean', short: 'h' } },
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  if (tokens.some((t) => t.kind === 'option' && t.name === 'help')) return { help: true, values: {}, args: [] };
  const values: Record<string, string | boolean> = {};
  const args: string[] = [];
  for (const token of tokens) {
    if (token.kind === 'positional') args.push(token.value);
    if (token.kind !== 'option') continue;
    const option = spec.options[token.name];
    // Short forms exist for -h only; `-p` is not `--p`.
    if (option === undefined || !token.rawName.startsWith('--'))
      throw new UsageError(`${spec.name} does not take ${token.rawName}; ${seeHelp(spec)}`);
    if (option.type === 'string' && token.value === undefined) throw new UsageError(`${token.rawName} needs a value; ${seeHelp(spec)}`);
    if (option.type === 'boolean' && token.inlineValue) throw new UsageError(`${token.rawName} takes no value; ${seeHelp(spec)}`);
    values[token.name] = token.value ?? true;
  }
  // `backup --into DIR` names its own file: FILE is not given then.
  if (spec.argsOrOption !== undefined && values[spec.argsOrOption] !== undefined) {
    if (args.length > 0)
      throw new UsageError(`${spec.name} takes ${spec.args.join(' ')} or --${spec.argsOrOption}, not both; ${seeHelp(spec)}`);
    return { help: false, values, args };
  }
  if (args.length < spec.args.length) {
    const missing = spec.args[args.length]!;
    const what = missing === 'ID' ? 'a key ID (petstore keys list shows them)' : `a ${missing.toLowerCase()}`;
    throw new UsageError(`${spec.name} needs ${what}; ${seeHelp(spec)}`);
  }
  if (args.length > spec.args.length)
    throw new UsageError(`${spec.name}: unexpected argument "${args[spec.args.length]}"; ${seeHelp(spec)}`);
  return { help: false, values, args };
}

/** The command named at the start of argv, and what follows it; or the help to print instead. */
function findCommand(argv: string[]): { spec: CommandSpec; rest: string[] } | { help: string } {
  const [first, second] = argv;
  if (first === undefined || first === '--help' || first === '-h') return { help: mainHelp() };
  if (first === 'help') return findHelp(argv.slice(1));
  if (Object.hasOwn(GROUPS, first)) {
    if (second === undefined || second === '--help' || second === '-h') return { help: groupHelp(first) };
    const spec = COMMANDS.find((c) => c.name === `${first} ${second}`);
    if (spec) return { spec, rest: argv.slice(2) };
    if (second.startsWith('-')) throw new UsageError(`${first} needs a command before ${second}; ${seeHelp(first)}`);
    throw new UsageError(`unknown ${first} command "${second}"; ${seeHelp(first)}`);
  }
  const spec = COMMANDS.find((c) => c.name === first);
  if (spec) return { spec, rest: argv.slice(1) };
  if (first.startsWith('-')) throw new UsageError(`unknown option ${first}; see petstore --help`);
  throw new UsageError(`unknown command "${first}"; see petstore --help`);
}

/** `petstore help keys create`: the help `petstore keys create --help` prints. */
function findHelp(words: string[]): { help: string } {
  const name = words.join(' ');
  if (name === '') return { help: mainHelp() };
  if (Object.hasOwn(GROUPS, name)) return { help: groupHelp(name) };
  const spec = COMMANDS.find((c) => c.name === name);
  if (!spec) throw new UsageError(`no command "${name}"; see petstore --help`);
  return { help: commandHelp(spec) };
}

/**
 * An optional `.env` file in the working directory supplies settings the environment leaves unset;
 * a variable that is set wins over the file. Node parses it (process.loadEnvFile).
 */
async function loadDotEnv(): Promise<void> {
  try {
    process.loadEnvFile('.env');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    const { ConfigError } = await loadConfigModule();
    throw new ConfigError(`.env could not be read: ${(err as Error).message}`);
  }
}

async function loadConfigModule(): Promise<typeof ConfigModule> {
  const module = await import('../config.ts');
  configErrorClass = module.ConfigError;
  return module;
}

/**
 * The configuration from the environment (and .env), with the flags that override a variable
 * (`serve --port` for PORT): a bad flag value is refused in the flag's name, as a usage error.
 */
async function readConfig(
  flags: Readonly<Record<string, { variable: string; value: string | undefined }>> = {},
): Promise<Readonly<Config>> {
  await loadDotEnv();
  const { loadConfig, ConfigError } = await loadConfigModule();
  const env = { ...process.env };
  for (const { variable, value } of Object.values(flags)) if (value !== undefined) env[variable] = value;
  try {
    return loadConfig(env);
  } catch (err) {
    for (const [flag, { variable, value }] of Object.entries(flags)) {
      if (value !== undefined && err instanceof ConfigError && err.message.startsWith(`${variable} `)) {
        throw new UsageError(`${flag}${err.message.slice(variable.length)}`);
      }
    }
    throw err;
  }
}

/** How a command opens the database: waits said on stderr, so that what the command prints stays its output. */
function openOptions(config: Config, migrations: MigrationOptions): OpenOptions {
  return {
    synchronous: config.sqliteSynchronous,
    lockWaitMs: config.sqliteLockWaitMs,
    // On stderr, so that the key `keys create` prints stays its output's last line.
    migrationWait: { waitMs: config.migrationLockWaitMs, onWait: (message) => console.error(`petstore: ${printable(message)}`) },
    migrations,
  };
}

/** The store, opened as MIGRATIONS says: a `keys` command migrates the database, or refuses one that is behind. */
async function withStore<T>(config: Config, work: (store: Store) => Promise<T>): Promise<T> {
  const { openStore } = await import('../storage/open.ts');
  const store = await openStore(
    config.database,
    openOptions(config, { mode: config.migrations, statementTimeoutMs: config.migrationStatementTimeoutMs }),
  );
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

/** `petstore migrate`: applies what is missing whatever MIGRATIONS says (it is the command that setting points to). */
async function migrate(): Promise<void> {
  const config = await readConfig();
  const [{ openStore, describeDatabase }, { outcomeLine }] = await Promise.all([
    import('../storage/open.ts'),
    import('../storage/migration-mode.ts'),
  ]);
  const started = performance.now();
  let outcome: MigrationOutcome | undefined;
  const store = await openStore(
    config.database,
    openOptions(config, {
      mode: 'apply',
      statementTimeoutMs: config.migrationStatementTimeoutMs,
      onOutcome: (o) => (outcome = o),
    }),
  );
  await store.close();
  const ms = performance.now() - started;
  const seconds = ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
  say(outcomeLine(describeDatabase(config.database), outcome!, seconds));
}

/** A line of prose: the IDs in it come from storage or the command line, so it is escaped (printable.ts). */
const say = (line: string) => console.log(printable(line));

const text = (value: string | boolean | undefined) => (typeof value === 'string' ? value : undefined);

async function serve({ values }: Parsed): Promise<void> {
  let config = await readConfig({
    '--port': { variable: 'PORT', value: text(values.port) },
    '--host': { variable: 'HOST', value: text(values.host) },
  });
  // Tracing is loaded only when it is on, and before the server: the instrumentations must be in
  // place before the PostgreSQL and Redis clients are first imported.
  const warnings = (await loadConfigModule()).lookalikeWarnings(process.env);
  if (config.workers > 1) {
    const { port, reusePort } = await (await import('../workers/port.ts')).claimSharedPort(config.host, config.port);
    if (reusePort) {
      const { superviseWorkers } = await import('../workers/supervisor.ts');
      return superviseWorkers({ ...config, port }, warnings);
    }
    warnings.push(
      `WORKERS is ${config.workers}, but this platform cannot listen on one port from several threads (no SO_REUSEPORT): ` +
        'serving from one thread; see docs/workers.md',
    );
    config = { ...config, workers: 1 };
  }
  const tracing = config.otlpEndpoint === undefined ? undefined : (await import('../tracing/start.ts')).startTracing(config);
  const { startServer } = await import('../server.ts');
  await startServer(config, tracing, warnings);
}

async function keys(action: string, { values, args }: Parsed): Promise<void> {
  const k = await import('./keys.ts');
  const id = args[0]!;
  const json = values.json === true;
  const options = { plan: text(values.plan), rpm: text(values.rpm), rpd: text(values.rpd), label: text(values.label) };
  // What the command line alone can tell is refused before the configuration or storage is read.
  if (action === 'list' && json && values.wide)
    throw new UsageError('keys list takes --wide or --json, not both; see petstore keys list --help');
  if (action === 'create' || action === 'plan') k.limitsFor(options);
  if (action === 'create') k.checkLabel(options.label);
  if (action === 'rotate' && values.grace !== undefined) k.parseDuration('--grace', text(values.grace) ?? '');
  if (action !== 'create' && action !== 'list') k.checkKeyId(id);
  const config = await readConfig();
  switch (action) {
    case 'create': {
      const { key, record } = await withStore(config, (store) => k.createKey(store, config.environment, options));
      const out = k.describeKey(record, undefined);
      if (json) {
        console.log(jsonLine({ ...out, key }));
      } else {
        say(`Created ${out.id}: plan ${out.plan} (${out.rpm}/minute, ${out.rpd}/day), ${out.environment} environment.`);
        console.log('This is the only time the key is shown; store it now:');
        console.log(key);
      }
      return;
    }
    case 'rotate': {
      const nowMs = Date.now();
      const rotated = await withStore(config, (store) => k.rotateKey(store, id, text(values.grace), nowMs));
      const { key, retired, bannedUntilMs } = rotated;
      const tooFar = bannedUntilMs !== undefined && bannedUntilMs - nowMs > config.banDurationSeconds * 1000;
      const out = k.describeKey(rotated.record, bannedUntilMs, tooFar);
      if (json) {
        console.log(jsonLine({ ...out, key, replaces: retired.id, replacedExpiresAt: retired.expiresAt!.toISOString() }));
      } else {
        say(`Created ${out.id} to replace ${retired.id}, which keeps working until ${retired.expiresAt!.toISOString()}.`);
        console.log(`Both count against the same minute and day limits and share bans.`);
        if (out.bannedUntil && tooFar)
          say(
            `${retired.id} has a ban stored until ${out.bannedUntil}, further than a ban lasts (each server ends it ` +
              `within one ban length of first reading it), which ${out.id} shares; petstore keys unban lifts it for both.`,
          );
        else if (out.bannedUntil)
          say(`${retired.id} is banned until ${out.bannedUntil}, so ${out.id} is too; petstore keys unban lifts it for both.`);
        console.log('This is the only time the key is shown; store it now:');
        console.log(key);
      }
      return;
    }
    case 'plan':
    case 'expire': {
      const record = await withStore(config, (store) =>
        action === 'plan'
          ? k.changePlan(store, id, options)
          : k.setExpiry(store, id, text(values.at), values.never === true, { nowMs: Date.now(), force: values.force === true }),
      );
      const out = k.describeKey(record, undefined);
      if (json) console.log(jsonLine(out));
      else if (action === 'plan')
        say(`${id} is now on plan ${out.plan} (${out.rpm}/minute, ${out.rpd}/day); running servers see it within 5 seconds.`);
      else say(out.expiresAt ? `${id} expires at ${out.expiresAt}.` : `${id} no longer expires.`);
      return;
    }
    case 'list': {
      const rows = await withStore(config, (store) => k.listKeys(store, Date.now(), config.banDurationSeconds * 1000));
      console.log(json ? jsonLine(rows) : k.formatKeyTable(rows, Date.now(), { wide: values.wide === true }));
      return;
    }
    case 'revoke': {
      if (!(await withStore(config, (store) => store.revokeKey(id))))
        throw new StateError(`no active key with ID ${id} (petstore keys list shows each key's ID and state)`);
      if (json) console.log(jsonLine({ id, action }));
      else say(`Revoked ${id}; running servers see it within 5 seconds.`);
      return;
    }
    case 'unban': {
      const sharing = (await withStore(config, (store) => k.unbanKey(store, id, Date.now()))).map((other) => other.id);
      const also =
        sharing.length === 0 ? '' : ` and on ${sharing.join(', ')}, which share${sharing.length === 1 ? 's' : ''} its limits by rotation`;
      if (json) console.log(jsonLine({ id, action, keys: [id, ...sharing] }));
      else say(`Lifted the ban on ${id}${also}; running servers see it within 5 seconds.`);
      return;
    }
  }
}

async function backupOrRestore(command: 'backup' | 'restore', { values, args }: Parsed): Promise<void> {
  const b = await import('./backup.ts');
  // --verify looks at a file only: no configuration, no database.
  if (values.verify === true && values.into === undefined) {
    if (values.force === true) throw new UsageError('backup takes --force or --verify, not both; see petstore backup --help');
    return b.verify(args[0]!);
  }
  const across = b.parseAcross(text(values['across-environments']));
  const into = b.parseInto(text(values.into), text(values.keep), values.force === true, values.verify === true);
  const config = await readConfig();
  if (command === 'backup' && into) await b.backupInto(config, into);
  else if (command === 'backup') await b.backup(config, args[0]!, values.force === true);
  else await b.restore(config, args[0]!, { across, withoutChecksum: values['without-checksum'] === true });
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--version' || argv[0] === '-v') {
    if (argv.length > 1) throw new UsageError(`${argv[0]} takes nothing after it; see petstore --help`);
    console.log(`petstore ${packageVersion()}`);
    return;
  }
  const found = findCommand(argv);
  if ('help' in found) {
    console.log(found.help);
    return;
  }
  const parsed = parseCommandLine(found.spec, found.rest);
  if (parsed.help) {
    console.log(commandHelp(found.spec));
    return;
  }
  const [group, action] = found.spec.name.split(' ');
  if (group === 'serve') return serve(parsed);
  if (group === 'migrate') return migrate();
  if (group === 'backup' || group === 'restore') return backupOrRestore(group, parsed);
  return keys(action!, parsed);
}

/** 0 done, 1 refused or failed at run time (configuration, storage, state), 2 a wrong command line. */
main(process.argv.slice(2)).catch((err: unknown) => {
  // A message may quote an argument or a stored value: escaped like every other line (printable.ts).
  const message = printable(err instanceof Error ? err.message : String(err));
  if (err instanceof UsageError) {
    console.error(`petstore: ${message}`);
    process.exit(2);
  }
  if (configErrorClass && err instanceof configErrorClass) console.error(`petstore: configuration error: ${message}`);
  else console.error(`petstore: ${message}`);
  process.exit(1);
});
