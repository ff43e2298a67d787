/**
 * What the `petstore` command understands: each command's flags, arguments and help, as data. The
 * parser (main.ts) refuses any flag a command does not list here, and `--help` prints this text, so
 * what is accepted and what is documented cannot drift apart. Nothing here touches configuration or
 * storage: help is printed without reading either.
 */
import { STANDARD_PLAN_LIMITS } from '../domain/plans.ts';

export interface OptionSpec {
  type: 'string' | 'boolean';
  /** How help names the value: N, TEXT, DURATION. */
  value?: string;
  help: string;
}

export interface CommandSpec {
  /** As typed after `petstore`: `serve`, `keys create`. */
  name: string;
  /** The arguments it takes, in order, as help names them. */
  args: readonly string[];
  /** A string option given in place of the arguments (`backup --into DIR` instead of FILE). */
  argsOrOption?: string;
  /** What follows the name and arguments in the usage line. */
  synopsis: string;
  summary: string;
  options: Readonly<Record<string, OptionSpec>>;
  /** Paragraphs after the options. */
  notes?: string;
}

const PLAN_VALUES = 'free|pro|business|enterprise';

const limits = (plan: keyof typeof STANDARD_PLAN_LIMITS) =>
  `${plan} (${STANDARD_PLAN_LIMITS[plan].perMinute}/min, ${STANDARD_PLAN_LIMITS[plan].perDay}/day)`;

const PLAN_HELP = `${limits('free')}, ${limits('pro')},\n${limits('business')} or enterprise (with --rpm and --rpd)`;

const JSON_KEY = { type: 'boolean', help: 'Print one JSON object, key included, instead of prose' } as const;
const JSON_RECORD = { type: 'boolean', help: "Print the key's record as one JSON object instead of prose" } as const;
const RPM = { type: 'string', value: 'N', help: 'Requests per minute (enterprise only, with --rpd)' } as const;
const RPD = { type: 'string', value: 'N', help: 'Requests per day, at least --rpm (enterprise only)' } as const;

/** The document that lists every variable (its table is written from src/config.ts, and tested). */
export const CONFIGURATION_DOC = 'docs/configuration.md';

const CONFIGURATION =
  'Reads DATABASE_URL, PETSTORE_ENV and the rest of the configuration from the environment and from\n' +
  `a .env file in the working directory (${CONFIGURATION_DOC} lists every variable), and applies\n` +
  'the migrations the database lacks first (with MIGRATIONS=refuse it refuses such a database).';

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'serve',
    args: [],
    synopsis: '[--port N] [--host ADDRESS]',
    summary: 'Run the HTTP service until SIGTERM or SIGINT, then shut down gracefully.',
    options: {
      port: { type: 'string', value: 'N', help: 'TCP port to listen on (0 to 65535); overrides PORT (default 8080)' },
      host: { type: 'string', value: 'ADDRESS', help: 'Address to listen on; overrides HOST (default 127.0.0.1; 0.0.0.0: all)' },
    },
    notes:
      'Configuration comes from environment variables and a .env file in the working directory:\n' +
      `DATABASE_URL, REDIS_URL, PETSTORE_ENV, LOG_LEVEL, ... (${CONFIGURATION_DOC} lists them all).\n` +
      'A configured PostgreSQL that cannot be reached stops the start (exit 1); an unreachable Redis\n' +
      'is reported and rate limits are counted in memory until it answers. The log is JSON lines on\n' +
      'standard output: the first after listening names the environment, storage, limiter, address\n' +
      'and docs page, and the last says what to do next (petstore keys create, then the docs page).\n\n' +
      'It applies the migrations the database lacks before it listens; with MIGRATIONS=refuse it exits 1\n' +
      'instead, naming the versions and petstore migrate, which applies them.\n\n' +
      'Under a supervisor, run this command itself (not through npx or a shell that stays in\n' +
      'between), so that its SIGTERM reaches the server: see docs/cli.md.',
  },
  {
    name: 'migrate',
    args: [],
    synopsis: '',
    summary: 'Apply the migrations the database lacks, then exit: once, before instances start.',
    options: {},
    notes:
      'Opens the database DATABASE_URL names (SQLite or PostgreSQL), waits for the migration lock while\n' +
      'another process holds it (up to MIGRATION_LOCK_WAIT_MS, said once on standard error), applies\n' +
      'in one transaction what this release has and the database lacks, and prints one line: the\n' +
      'versions it went from and to, or that the database was already current. It applies them\n' +
      'whatever MIGRATIONS says: with MIGRATIONS=refuse on the instances, it is the one command that\n' +
      'changes the schema. On PostgreSQL each migration statement is bounded by\n' +
      "MIGRATION_STATEMENT_TIMEOUT_MS (5 minutes; 0: none), not by the 2 s of the service's own\n" +
      'statements. A migration that fails applies nothing, and the command exits 1 naming it:\n' +
      'see docs/operations.md, "Rollout order".',
  },
  {
    name: 'keys create',
    args: [],
    synopsis: `--plan ${PLAN_VALUES} [--rpm N --rpd N] [--label TEXT] [--json]`,
    summary: 'Issue an API key, printed once alone on the last line; only its hash is stored.',
    options: {
      plan: { type: 'string', value: 'PLAN', help: PLAN_HELP },
      rpm: RPM,
      rpd: RPD,
      label: { type: 'string', value: 'TEXT', help: 'A note for operators (who the key is for): up to 200 characters of printable text' },
      json: JSON_KEY,
    },
    notes: CONFIGURATION + ' The key belongs to the environment PETSTORE_ENV names.',
  },
  {
    name: 'keys list',
    args: [],
    synopsis: '[--wide | --json]',
    summary: 'List the keys: ID, prefix, plan, limits, state, label. Never a key itself.',
    options: {
      wide: { type: 'boolean', help: 'Every column in full (environment, timestamps), however wide' },
      json: { type: 'boolean', help: 'One JSON array of every field, for scripts' },
    },
    notes:
      'The table fits 100 columns; a long label is cut (--wide shows it whole). The prefix names the\n' +
      'environment: pet_live_ production, pet_test_ staging.',
  },
  {
    name: 'keys rotate',
    args: ['ID'],
    synopsis: '[--grace DURATION] [--json]',
    summary: 'Issue a replacement (same plan, limits, label); the old key expires after --grace.',
    options: {
      grace: { type: 'string', value: 'DURATION', help: 'How long the old key keeps working: 90s, 30m, 24h, 7d (1s to 365d; default 24h)' },
      json: JSON_KEY,
    },
    notes:
      'The new key is the same subject as the old one for rate limits and bans: it goes on from the\n' +
      "old key's minute and day counts, and a banned key's replacement is banned too, until the ban\n" +
      'ends or keys unban lifts it (of either key, for both).',
  },
  {
    name: 'keys plan',
    args: ['ID'],
    synopsis: `--plan ${PLAN_VALUES} [--rpm N --rpd N] [--json]`,
    summary: "Change a key's plan and limits; servers apply it within KEY_CACHE_TTL_MS.",
    options: { plan: { type: 'string', value: 'PLAN', help: PLAN_HELP }, rpm: RPM, rpd: RPD, json: JSON_RECORD },
  },
  {
    name: 'keys expire',
    args: ['ID'],
    synopsis: '--at TIMESTAMP [--force] | --never [--json]',
    summary: 'Set or clear the moment a key stops working.',
    options: {
      at: { type: 'string', value: 'TIMESTAMP', help: 'ISO 8601 with a time zone, like 2027-01-31T00:00:00Z' },
      force: { type: 'boolean', help: 'Accept a moment in the past (the key stops working at once)' },
      never: { type: 'boolean', help: 'Clear the expiry' },
      json: JSON_RECORD,
    },
  },
  {
    name: 'keys revoke',
    args: ['ID'],
    synopsis: '[--json]',
    summary: 'Revoke a key for good; servers refuse it within KEY_CACHE_TTL_MS.',
    options: { json: { type: 'boolean', help: 'Print {"id","action"} as JSON instead of prose' } },
  },
  {
    name: 'keys unban',
    args: ['ID'],
    synopsis: '[--json]',
    summary: 'Lift the temporary ban a key earned by exceeding its limits.',
    options: { json: { type: 'boolean', help: 'Print {"id","action","keys"} as JSON instead of prose' } },
    notes:
      'Keys made by keys rotate share one ban with the key they replace: unbanning any of them lifts\n' +
      'it for all, and the output names them.',
  },
  {
    name: 'backup',
    args: ['FILE'],
    argsOrOption: 'into',
    synopsis: '[--force | --verify] | --into DIR [--keep N]',
    summary: 'Copy the SQLite database to FILE while servers keep running: one consistent snapshot.',
    options: {
      force: { type: 'boolean', help: 'Replace FILE and FILE.sha256 if they exist (without it, an existing FILE is refused)' },
      into: {
        type: 'string',
        value: 'DIR',
        help:
          'Instead of FILE: write DIR/petstore-YYYYMMDDTHHMMSSZ.db, named by the\n' +
          'UTC second the backup began (the shipped timer and BACKUP_DIR use this)',
      },
      keep: {
        type: 'string',
        value: 'N',
        help: 'With --into: then remove the oldest such backups in DIR beyond the newest N',
      },
      verify: {
        type: 'boolean',
        help:
          'Check FILE, a backup, instead of writing one: its checksum, integrity,\n' +
          'schema version and environment. Writes nothing, reads no configuration;\n' +
          'exit 1 when a check fails',
      },
    },
    notes:
      'Servers keep reading and writing meanwhile: the copy holds every write acknowledged before the\n' +
      'backup began. It is written beside FILE as FILE.partial-HOST-PID and renamed to FILE only once\n' +
      'complete and on disk, so FILE is never a half copy; the partial file of a backup that was killed\n' +
      'is removed by the next backup into that folder. Prints the pets, keys, environment and size copied.\n\n' +
      "FILE is no more readable than the database: it gets the database's mode, without the group's\n" +
      "bits when FILE's group is another. Its SHA-256 is written first to FILE.sha256, as sha256sum\n" +
      'writes it: copy the two together, since restore refuses a FILE whose bytes changed or that has\n' +
      'no checksum. FILE records the environment of the database: the one recorded in it, or that of\n' +
      'its API keys, or PETSTORE_ENV when neither tells.\n\n' +
      'Reads DATABASE_URL and PETSTORE_ENV (and a .env file in the working directory). On PostgreSQL\n' +
      'it refuses: use pg_dump (docs/operations.md, "Backups").',
  },
  {
    name: 'restore',
    args: ['FILE'],
    synopsis: '[--across-environments FROM:TO] [--without-checksum]',
    summary: 'Replace the SQLite database with FILE, a backup, after checking it. Stop every server first.',
    options: {
      'across-environments': {
        type: 'string',
        value: 'FROM:TO',
        help:
          'Restore a backup of environment FROM over a database of TO:\n' +
          'staging:production or production:staging. Without it, a backup\n' +
          'of the other environment is refused',
      },
      'without-checksum': {
        type: 'boolean',
        help: 'Restore a FILE that has no FILE.sha256 beside it, unchecked\n(a FILE.sha256 that is there is always checked)',
      },
    },
    notes:
      'Refused, with the database left as it was: while a server or any other process has the database\n' +
      "open; when FILE's bytes are not those FILE.sha256 records, or it has none; when FILE fails\n" +
      "SQLite's integrity check, or its schema is newer than this release's; and when FILE is of the\n" +
      'other environment than the database (the one recorded in it, or that of its API keys, or\n' +
      'PETSTORE_ENV when neither tells or there is no database). An older schema is migrated by the\n' +
      'next start, or by petstore migrate where MIGRATIONS=refuse.\n\n' +
      'The database is locked before anything is replaced, also where there is none yet, so a server\n' +
      'or command that opens it meanwhile waits, then opens the restored file. A database path that is\n' +
      'a symbolic link is followed: the file it leads to is replaced, the link stays. The restored file\n' +
      "keeps the replaced one's mode and owner (where there was none: mode 0600, owned by the folder's\n" +
      'owner when run as root). The database, its -wal and its -shm are replaced at once, and new pets\n' +
      'get ids above any the replaced database handed out. Everything done since the backup is undone,\n' +
      'key revocations included: revoke such keys again.\n\n' +
      'Reads DATABASE_URL and PETSTORE_ENV (and a .env file in the working directory). On PostgreSQL\n' +
      'it refuses: use pg_restore or psql (docs/operations.md, "Backups").',
  },
];

/** Commands that only group others: `petstore keys` alone shows what it holds. */
export const GROUPS: Readonly<Record<string, string>> = {
  keys: 'Manage API keys in the database DATABASE_URL names.',
};

export const EXIT_STATUS =
  'Exit status: 0 done; 1 refused or failed (configuration, storage, an unknown or revoked key);\n' + '2 the command line is wrong.';

function usageLine(spec: CommandSpec): string {
  return ['petstore', spec.name, ...spec.args, spec.synopsis].filter((part) => part !== '').join(' ');
}

/** Two columns: what to type, what it does (a line break in the latter continues under it). */
function columns(rows: readonly (readonly [string, string])[]): string {
  const width = Math.max(...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right.replaceAll('\n', `\n  ${' '.repeat(width)}  `)}`).join('\n');
}

export function commandHelp(spec: CommandSpec): string {
  const options: [string, string][] = Object.entries(spec.options).map(([name, o]) => [`--${name}${o.value ? ` ${o.value}` : ''}`, o.help]);
  options.push(['-h, --help', 'Show this help']);
  return [
    `Usage: ${usageLine(spec)}`,
    spec.summary,
    `Options:\n${columns(options)}`,
    ...(spec.notes ? [spec.notes] : []),
    EXIT_STATUS,
  ].join('\n\n');
}

export function groupHelp(group: string): string {
  const members = COMMANDS.filter((c) => c.name.startsWith(`${group} `));
  const rows = members.map((c) => [[c.name.slice(group.length + 1), ...c.args].join(' '), c.summary] as const);
  return [
    `Usage: petstore ${group} COMMAND [ARGUMENTS] [OPTIONS]`,
    GROUPS[group]!,
    `Commands:\n${columns(rows)}`,
    `petstore ${group} COMMAND --help shows a command's options.`,
    EXIT_STATUS,
  ].join('\n\n');
}

export function mainHelp(): string {
  return [
    'petstore: the pet adoption service, its schema, its API keys and its backups.',
    `Usage:\n${COMMANDS.map((c) => `  ${usageLine(c)}`).join('\n')}\n  petstore --version`,
    'petstore COMMAND --help (or petstore help COMMAND) shows what a command does and its options.\n' +
      'Configuration comes from environment variables and a .env file: PORT, HOST, DATABASE_URL,\n' +
      `PETSTORE_ENV, ... (${CONFIGURATION_DOC} lists them all). More in docs/cli.md.`,
    EXIT_STATUS,
  ].join('\n\n');
}
