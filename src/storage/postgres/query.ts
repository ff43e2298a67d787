/**
 * Every statement goes through the pool; "database not reachable now" failures become StorageUnavailableError
 * (a 503). Hot statements are named, each name carrying a hash of its text; behind a pooler that loses them
 * (docs/scale-out.md, "Through PgBouncer") the refused statement is sent again unnamed, as is every later one.
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
