/**
 * What opening a database does with the migrations this release has and the database lacks, as both
 * engines do it: apply them (MIGRATIONS=apply, the default, so that one command starts the embedded
 * service), or refuse a database that lacks any (MIGRATIONS=refuse), so that only `petstore migrate`
 * changes a schema (docs/operations.md, "Rollout order"). A database ahead of this release (it records
 * versions this release does not know) is opened either way, as before: instances of the previous
 * release keep running while the next one rolls out.
 */

/** The setting that chooses, named in a refusal. */
export const MIGRATIONS_SETTING = 'MIGRATIONS';

export const MIGRATION_MODES = ['apply', 'refuse'] as const;
export type MigrationMode = (typeof MIGRATION_MODES)[number];

/** The setting that bounds each migration statement on PostgreSQL, named when it ends one. */
export const STATEMENT_TIMEOUT_SETTING = 'MIGRATION_STATEMENT_TIMEOUT_MS';

/**
 * MIGRATION_STATEMENT_TIMEOUT_MS's default: as long as a start waits for another's migration
 * (MIGRATION_LOCK_WAIT_MS), far beyond the 2 s bound of the service's own statements.
 */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 300_000;

export interface MigrationOptions {
  mode: MigrationMode;
  /**
   * PostgreSQL: each migration statement's bound, waiting for table locks included (0: none). SQLite has
   * none to set: once a migration holds the write lock, nothing it runs waits for another process.
   */
  statementTimeoutMs: number;
  /** Told what opening found and applied, once the migrations are committed. */
  onOutcome?: (outcome: MigrationOutcome) => void;
}

export const DEFAULT_MIGRATIONS: MigrationOptions = { mode: 'apply', statementTimeoutMs: DEFAULT_STATEMENT_TIMEOUT_MS };

export interface MigrationOutcome {
  /** The highest version the database recorded before (0: none, a new database). */
  from: number;
  /** The highest it records now. */
  to: number;
  /** This release's latest version. */
  latest: number;
  /** The versions applied now, in order. */
  applied: readonly number[];
}

/** What a database that records `recorded` lacks of `versions`, and where it stands. */
export function missingOf(recorded: ReadonlySet<number>, versions: readonly number[]): { from: number; missing: number[] } {
  return { from: Math.max(0, ...recorded), missing: versions.filter((v) => !recorded.has(v)) };
}

/** Versions in words, runs of consecutive ones as ranges: "6", "6 and 7", "1 to 9", "2 and 6 to 9". */
export function versionList(versions: readonly number[]): string {
  const runs: string[] = [];
  for (let i = 0; i < versions.length;) {
    let j = i;
    while (j + 1 < versions.length && versions[j + 1] === versions[j]! + 1) j++;
    runs.push(j - i >= 2 ? `${versions[i]} to ${versions[j]}` : versions.slice(i, j + 1).join(', '));
    i = j + 1;
  }
  const last = runs.pop()!;
  return runs.length === 0 ? last : `${runs.join(', ')} and ${last}`;
}

/**
 * A database could not be migrated, or must not be: nothing of the run was applied (one transaction). Its
 * message names "the database" until opening names it as DATABASE_URL does (`naming`).
 */
export class MigrationError extends Error {
  readonly #words: (database: string) => string;

  constructor(words: (database: string) => string, options?: ErrorOptions) {
    super(words('the database'), options);
    this.#words = words;
  }

  /** The same error, its message naming the database ("PostgreSQL at db:5432, database petstore"). */
  naming(database: string): this {
    this.message = this.#words(database);
    return this;
  }
}

/** MIGRATIONS=refuse, and the database lacks migrations this release needs. */
export class SchemaBehindError extends MigrationError {
  constructor(from: number, latest: number, missing: readonly number[]) {
    const at = from === 0 ? 'schema version 0 (no schema yet)' : `schema version ${from}`;
    super(
      (database) =>
        `${database} is at ${at}; this release needs version ${latest} (migration${missing.length === 1 ? '' : 's'} ` +
        `${versionList(missing)}). ${MIGRATIONS_SETTING}=refuse: it applies no migrations itself. ` +
        'Run petstore migrate with this DATABASE_URL, then start again',
    );
  }
}

/** A migration's statement failed (`reason`): the run is rolled back, the database stays at `from`. */
export function migrationFailed(version: number, name: string, from: number, reason: string, cause: unknown): MigrationError {
  return new MigrationError(
    (database) =>
      `${database}: migration ${version} (${name}) failed: ${reason}; nothing was applied, the database stays at version ${from}`,
    { cause },
  );
}

/** `petstore migrate`'s line: what it found and did. */
export function outcomeLine(database: string, { from, to, latest, applied }: MigrationOutcome, seconds: string): string {
  if (applied.length > 0) {
    const start = from === 0 ? 'a new database' : `version ${from}`;
    const what = `migration${applied.length === 1 ? '' : 's'} ${versionList(applied)}`;
    return `Migrated ${database} from ${start} to version ${to}: applied ${what} in ${seconds}.`;
  }
  if (to > latest) return `${database} is at version ${to}, ahead of this release's ${latest}: nothing to apply.`;
  return `${database} is already at version ${to}: nothing to apply.`;
}
