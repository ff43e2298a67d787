/**
 * Another process holding the lock a start migrates under, until the test releases it: PostgreSQL's
 * migration lock (an advisory lock) held by a session of the test's own, and a SQLite file's write lock
 * held by a child process; and a PostgreSQL table lock, which a migration's statements wait for once it
 * holds the migration lock. Each is released at its owner's end if the test has not released it.
 */
import { spawn } from 'node:child_process';
import pg from 'pg';
import { MIGRATION_LOCK } from '../../src/storage/postgres/migration-lock.ts';
import { atEnd, killAtExit, type Owner } from './temp.ts';

export interface LockHolder {
  /** PostgreSQL only: the backend that holds it, as pg_stat_activity shows it (an address, or null on a socket). */
  session?: { pid: number; user: string; address: string | null };
  /** Lets go of the lock; resolves once it is released. Releasing twice is harmless. */
  release(): Promise<void>;
}

/**
 * The migration lock of the database at url, held by a session of its own: `session` as an operator takes it
 * (`SELECT pg_advisory_lock(...)`, on a direct connection only: a transaction pooler hands the session to
 * others), `transaction` as a migrating start does (inside an open transaction, which keeps its server
 * connection through a pooler too).
 */
export async function holdMigrationLock(owner: Owner, url: string, scope: 'session' | 'transaction'): Promise<LockHolder> {
  const client = new pg.Client({ connectionString: url, application_name: 'lock-holder' });
  await client.connect();
  let released: Promise<void> | undefined;
  const release = () =>
    (released ??= (async () => {
      if (scope === 'transaction') await client.query('COMMIT');
      else await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
      await client.end();
    })());
  atEnd(owner, release);
  if (scope === 'transaction') {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
  } else {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  }
  // Inside the transaction, or on the session, this is the backend that holds it, also behind a pooler.
  const { rows } = await client.query<{ pid: number; user: string; address: string | null }>(
    'SELECT pg_backend_pid() AS pid, session_user AS user, host(inet_client_addr()) AS address',
  );
  return { session: rows[0]!, release };
}

/** The write lock of the SQLite file, held by another process (BEGIN IMMEDIATE) until released. */
export async function holdSqliteWriteLock(owner: Owner, file: string): Promise<LockHolder> {
  // It holds the lock until its standard input closes, then commits and exits.
  const code = `
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
    const db = new DatabaseSync(process.argv[1]);
    db.exec('PRAGMA busy_timeout = 5000');
    db.exec('PRAGMA journal_mode = WAL'); // as every start leaves the file, before it migrates
    db.exec('BEGIN IMMEDIATE');
    console.log('held');
    process.stdin.resume().on('end', () => { db.exec('COMMIT'); db.close(); });`;
  const holder = spawn(process.execPath, ['-e', code, file], { stdio: ['pipe', 'pipe', 'inherit'] });
  killAtExit(holder);
  const exited = new Promise<void>((resolve) => holder.once('exit', () => resolve()));
  const release = async () => {
    holder.stdin.end();
    await exited;
  };
  atEnd(owner, release);
  await new Promise<void>((resolve, reject) => {
    holder.stdout.once('data', () => resolve());
    holder.once('exit', (code) => reject(new Error(`the lock holder exited with ${code} before holding the lock`)));
  });
  return { release };
}

/**
 * A lock on a table of the PostgreSQL database at url, held in an open transaction of a session of its own
 * (`LOCK TABLE ... IN ACCESS SHARE MODE` is what any long SELECT holds): a migration's ALTER TABLE waits
 * for it, as it would for a report still reading the table.
 */
export async function holdTableLock(owner: Owner, url: string, table: string, mode = 'ACCESS SHARE'): Promise<LockHolder> {
  const client = new pg.Client({ connectionString: url, application_name: 'lock-holder' });
  await client.connect();
  let released: Promise<void> | undefined;
  const release = () =>
    (released ??= (async () => {
      await client.query('COMMIT');
      await client.end();
    })());
  atEnd(owner, release);
  await client.query('BEGIN');
  await client.query(`LOCK TABLE ${table} IN ${mode} MODE`);
  return { release };
}
