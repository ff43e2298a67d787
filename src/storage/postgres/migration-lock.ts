/**
 * PostgreSQL's migration lock: a transaction-scoped advisory lock, taken inside the migration's own
 * transaction so that a transaction pooler (PgBouncer) cannot hand it to another client. It is asked for
 * without waiting inside PostgreSQL and asked again every POLL_MS, each try a transaction of its own, for
 * up to MIGRATION_LOCK_WAIT_MS: no statement waits past the per-statement bound (the client's query
 * timeout, statement_timeout), and between tries no server connection is kept from the pooler.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { lockTimeout, UNTOLD_WAIT_MS, waitingMessage, type HeldLock, type MigrationWait } from '../migration-wait.ts';

/** An arbitrary constant naming this service's migration lock. */
export const MIGRATION_LOCK = 7_316_482_105;

/** Between tries: short beside a migration, long beside a try (one round trip). */
const POLL_MS = 200;

/**
 * Who holds the lock, as pg_locks and pg_stat_activity tell it (a bigint key is split into classid and
 * objid, objsubid 1); just "another session" when it was released in between.
 */
async function heldLock(client: pg.ClientBase): Promise<HeldLock> {
  const { rows } = await client.query<{
    pid: number | null;
    application_name: string | null;
    usename: string | null;
    client_addr: string | null;
  }>(
    `SELECT l.pid, a.application_name, a.usename, host(a.client_addr) AS client_addr
       FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND ((l.classid::bigint << 32) | l.objid::bigint) = $1
      LIMIT 1`,
    [MIGRATION_LOCK],
  );
  const row = rows[0];
  const facts = row
    ? [
        row.pid === null ? 'a prepared transaction' : `pid ${row.pid}`,
        row.application_name ? `application ${JSON.stringify(row.application_name)}` : undefined,
        row.usename ? `user ${row.usename}` : undefined,
        row.client_addr ? `from ${row.client_addr}` : undefined,
      ].filter((fact) => fact !== undefined)
    : [];
  return {
    lock: `the migration lock (PostgreSQL advisory lock ${MIGRATION_LOCK})`,
    holder: facts.length > 0 ? `another session (${facts.join(', ')})` : 'another session',
  };
}

/**
 * Begins a transaction on `client` that holds the migration lock, its statements bounded by `timeoutMs`
 * each; while another session holds the lock, tells `wait.onWait` once and tries again until
 * `wait.waitMs` has passed, then throws MigrationLockTimeoutError.
 */
export async function beginHoldingMigrationLock(client: pg.ClientBase, timeoutMs: number, wait: MigrationWait): Promise<void> {
  const started = performance.now();
  let told = false;
  for (;;) {
    await client.query('BEGIN');
    // Per transaction, not per session: a transaction pooler may hand the session to someone else.
    await client.query(`SET LOCAL statement_timeout = ${Math.trunc(timeoutMs)}`);
    const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS locked', [MIGRATION_LOCK]);
    if (rows[0]!.locked) return;
    await client.query('ROLLBACK');
    const waited = performance.now() - started;
    if (waited >= wait.waitMs) throw lockTimeout(await heldLock(client), waited, wait.waitMs);
    if (!told && waited >= UNTOLD_WAIT_MS) {
      told = true;
      wait.onWait?.(waitingMessage(await heldLock(client), wait.waitMs));
    }
    await sleep(Math.min(POLL_MS, wait.waitMs - waited));
  }
}
