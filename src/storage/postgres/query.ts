/**
 * How every PostgreSQL statement of the store is sent: through the pool, one statement at a time, with
 * failures that mean "the database is not reachable now" turned into StorageUnavailableError (a 503),
 * and everything else (a bad query, a constraint) passed on as it is. pool.query hands a connection
 * whose statement failed back with the error, and the pool then closes it: a connection in an unknown
 * state is not reused.
 *
 * Prepared statements and transaction pooling. The hot path's statements are named, so PostgreSQL
 * parses and plans them once per connection. Behind a pooler in transaction mode (PgBouncer before
 * 1.21, or with max_prepared_statements at its default of 0) our connection is not one server
 * connection: a name prepared through one server connection is missing on the next ("prepared
 * statement ... does not exist", 26000), or was already prepared there by another client ("already
 * exists", 42P05). Both are refused before anything runs, so the statement is sent again unnamed, and
 * every later statement of this process goes unnamed too. A name carries a hash of its text, so that
 * a server connection shared with another version of the service can never run a different text
 * under the same name.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { StorageUnavailableError } from '../errors.ts';

/**
 * Runs one statement and resolves with its rows. `name` makes a prepared statement (parsed and planned
 * once per connection): for the hot path.
 */
export type Query = <R extends pg.QueryResultRow>(text: string, values?: unknown[], name?: string) => Promise<R[]>;

/** SQLSTATE classes and client errors that mean "the database is not reachable now", not "bad query". */
function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (typeof e.code === 'string' && /^(08|53|57P)/.test(e.code)) return true; // connection, resources, shutdown
  if (e.code === 'ECONNREFUSED' || e.code === 'ECONNRESET' || e.code === 'ETIMEDOUT' || e.code === 'EPIPE') return true;
  return /timeout|terminated|Connection|ECONN/i.test(e.message ?? '');
}

/** A named statement missing on, or already prepared on, the server connection a pooler gave us. */
function isPooledStatementClash(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === '26000' || code === '42P05';
}

export interface QueryOptions {
  /** Told once, when the first clash turns prepared statements off for the rest of the process. */
  onUnnamed?: (err: unknown) => void;
}

export function queryOn(pool: pg.Pool, options: QueryOptions = {}): Query {
  let named = true;
  /** Each label's full name, made once: the label plus a hash of the statement's text. */
  const names = new Map<string, string>();
  const nameOf = (label: string, text: string): string => {
    let name = names.get(label);
    if (name === undefined) {
      name = `${label}-${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
      names.set(label, name);
    }
    return name;
  };

  const send = async <R extends pg.QueryResultRow>(text: string, values: unknown[], name: string | undefined): Promise<R[]> => {
    try {
      return (await pool.query<R>({ text, values, name })).rows;
    } catch (err) {
      throw isUnavailable(err) ? new StorageUnavailableError(err) : err;
    }
  };

  return async <R extends pg.QueryResultRow>(text: string, values: unknown[] = [], label?: string): Promise<R[]> => {
    if (label === undefined || !named) return send<R>(text, values, undefined);
    try {
      return await send<R>(text, values, nameOf(label, text));
    } catch (err) {
      if (!isPooledStatementClash(err)) throw err;
      if (named) {
        named = false;
        options.onUnnamed?.(err);
      }
      return send<R>(text, values, undefined);
    }
  };
}
