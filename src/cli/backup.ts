/**
 * `petstore backup FILE`, `petstore backup --verify FILE` and `petstore restore FILE`: the embedded
 * SQLite database copied while servers run, a copy checked, and the database replaced by such a
 * copy while none runs (storage/sqlite/backup.ts, verify.ts, restore.ts). PostgreSQL has its own
 * tools, which these commands name rather than imitate (docs/operations.md).
 */
import { resolve } from 'node:path';
import type { Config } from '../config.ts';
import { ENVIRONMENTS, type Environment } from '../domain/api-key.ts';
import type { Across } from '../storage/sqlite/restore.ts';
import type { DatabaseSummary } from '../storage/sqlite/summary.ts';
import { StateError, UsageError } from './errors.ts';
import { printable } from './printable.ts';

const DOCS = 'see docs/operations.md, "Backups"';

/** The SQLite file DATABASE_URL names, or the one-line refusal that points PostgreSQL to its tools. */
async function sqliteTarget(config: Config, command: 'backup' | 'restore'): Promise<{ path: string; createFolder?: boolean }> {
  const target = config.database;
  if (target.engine === 'postgres') {
    const { describePostgres } = await import('../storage/open.ts');
    const tool = command === 'backup' ? 'back it up with pg_dump' : 'restore it with pg_restore or psql';
    throw new StateError(
      `${command} is for the embedded SQLite database; DATABASE_URL names ${describePostgres(target.url)}: ${tool} (${DOCS})`,
    );
  }
  if (target.path === ':memory:')
    throw new StateError(`DATABASE_URL names an in-memory SQLite database, which no file holds: nothing to ${command}`);
  return target;
}

/** --across-environments FROM:TO, two different environments; checked before anything is read. */
export function parseAcross(value: string | undefined): Across | undefined {
  if (value === undefined) return undefined;
  const [from, into, ...rest] = value.split(':');
  const known = (name: string | undefined): name is Environment => ENVIRONMENTS.includes(name as Environment);
  if (rest.length > 0 || !known(from) || !known(into) || from === into) {
    throw new UsageError(
      `--across-environments takes FROM:TO, the backup's environment and the database's (${ENVIRONMENTS.join(' or ')}), ` +
        `like staging:production; see petstore restore --help`,
    );
  }
  return `${from}:${into}`;
}

function size(bytes: number): string {
  return bytes < 1e6 ? `${(bytes / 1e3).toFixed(1)} kB` : `${(bytes / 1e6).toFixed(1)} MB`;
}

const counted = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

const environmentOf = (s: DatabaseSummary) => s.environment.environment ?? 'no known environment';

const holds = (s: DatabaseSummary) => {
  const contents = `${counted(s.pets, 'pet')} and ${counted(s.keys, 'API key')} of ${environmentOf(s)}`;
  return `${contents} (schema version ${s.schemaVersion}, ${size(s.bytes)})`;
};

const seconds = (startedMs: number) => `${((performance.now() - startedMs) / 1000).toFixed(1)} s`;

export async function backup(config: Config, file: string, force: boolean): Promise<void> {
  const database = (await sqliteTarget(config, 'backup')).path;
  const { backupSqlite } = await import('../storage/sqlite/backup.ts');
  const started = performance.now();
  const copied = backupSqlite(database, file, { force, environment: config.environment });
  console.log(printable(`Backed up ${holds(copied)} from ${resolve(database)} to ${resolve(file)} in ${seconds(started)}.`));
  console.log(printable(`Its SHA-256 is in ${copied.checksumFile}: copy the two together; restore checks it.`));
}

export interface Into {
  folder: string;
  /** How many dated backups to leave in the folder, the new one included; all when undefined. */
  keep: number | undefined;
}

/** --into DIR and --keep N, checked before anything is read: N a whole number from 1, --keep only with --into. */
export function parseInto(folder: string | undefined, keep: string | undefined, force: boolean, verify = false): Into | undefined {
  if (folder === undefined) {
    if (keep !== undefined) throw new UsageError('--keep goes with --into DIR; see petstore backup --help');
    return undefined;
  }
  if (force) throw new UsageError('--into names a new file, which --force has nothing to replace in; see petstore backup --help');
  if (verify) throw new UsageError('--verify checks a FILE: it does not go with --into; see petstore backup --help');
  if (keep !== undefined && !/^[1-9]\d{0,5}$/.test(keep))
    throw new UsageError(`--keep takes how many backups to keep, from 1, not "${keep}"; see petstore backup --help`);
  return { folder, keep: keep === undefined ? undefined : Number(keep) };
}

/** A backup named by when it began, in folder; then the oldest beyond `keep` removed (backup-folder.ts). */
export async function backupInto(config: Config, { folder, keep }: Into): Promise<void> {
  const { datedBackupName, pruneDatedBackups } = await import('../storage/sqlite/backup-folder.ts');
  await backup(config, resolve(folder, datedBackupName(new Date())), false);
  if (keep === undefined) return;
  const removed = pruneDatedBackups(folder, keep);
  if (removed.length > 0)
    console.log(printable(`Removed ${counted(removed.length, 'older backup')} beyond ${keep}: ${removed.join(', ')}.`));
}

/** Prints what was found of the backup at file; refuses (exit 1) when any check failed. */
export async function verify(file: string): Promise<void> {
  const { verifyBackup } = await import('../storage/sqlite/verify.ts');
  const { file: path, findings, summary } = verifyBackup(file);
  const rows = findings.map((f) => [f.check, f.says]);
  if (summary) rows.push(['holds', `${counted(summary.pets, 'pet')} and ${counted(summary.keys, 'API key')}, ${size(summary.bytes)}`]);
  console.log(printable(`${path}:`));
  for (const [check, says] of rows) console.log(printable(`  ${check!.padEnd(12)}${says}`));
  const failed = findings.filter((f) => !f.ok);
  if (failed.length > 0) {
    throw new StateError(`${path} failed verification: ${failed.map((f) => `${f.check} ${f.says}`).join('; ')}`);
  }
  console.log(`Verified: petstore restore accepts it over a database of ${summary ? environmentOf(summary) : 'its environment'}.`);
}

export interface RestoreFlags {
  across: Across | undefined;
  withoutChecksum: boolean;
}

export async function restore(config: Config, file: string, { across, withoutChecksum }: RestoreFlags): Promise<void> {
  const target = await sqliteTarget(config, 'restore');
  const database = target.path;
  const [{ restoreSqlite }, { LATEST_SQLITE_VERSION }, { prepareSqliteFolder }] = await Promise.all([
    import('../storage/sqlite/restore.ts'),
    import('../storage/sqlite/migrations.ts'),
    import('../storage/open.ts'),
  ]);
  const started = performance.now();
  prepareSqliteFolder(database, target.createFolder === true);
  const restored = restoreSqlite(file, database, { environment: config.environment, across, withoutChecksum });
  const given = resolve(database);
  const into = restored.database === given ? given : `${restored.database} (where ${given} leads)`;
  console.log(printable(`Restored ${holds(restored)} from ${resolve(file)} into ${into} in ${seconds(started)}.`));
  if (!restored.checksumChecked)
    console.log(printable(`It had no checksum beside it: its bytes were restored unchecked (--without-checksum).`));
  const was = restored.environment.environment;
  if (was !== undefined && was !== restored.restoredInto) {
    const now = restored.restoredInto;
    console.log(
      `The database is ${now}'s now, as recorded in it: ${now} servers refuse its ${was} keys (petstore keys create makes new ones).`,
    );
  }
  if (restored.petIdsContinueAfter !== undefined) {
    console.log(
      `New pets get ids above ${restored.petIdsContinueAfter}, the highest the replaced database handed out: no id is given twice.`,
    );
  }
  if (restored.schemaVersion < LATEST_SQLITE_VERSION) {
    const versions = `from schema version ${restored.schemaVersion} to ${LATEST_SQLITE_VERSION}`;
    console.log(
      config.migrations === 'refuse'
        ? `Run petstore migrate to migrate it ${versions}: with MIGRATIONS=refuse, starts refuse it until then.`
        : `The next start (of the server or any petstore command) migrates it ${versions}.`,
    );
  }
}
