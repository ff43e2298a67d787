/**
 * How every PostgreSQL statement of the store is sent: through the pool, one statement at a time, with
 * failures that mean "the database is not reachable now" turned into StorageUnavailableError (a 503),
 * and everything else (a bad query, a constraint) passed on as it is. pool.query hands a connection
 * whose statement failed back with the error, and the pool then closes it: a connection in an unknown
 * state is not reused.
 */
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

export function queryOn(pool: pg.Pool): Query {
  return async <R extends pg.QueryResultRow>(text: string, values: unknown[] = [], name?: string): Promise<R[]> => {
    try {
      return (await pool.query<R>({ text, values, name })).rows;
    } catch (err) {
      throw isUnavailable(err) ? new StorageUnavailableError(err) : err;
    }
  };
}
