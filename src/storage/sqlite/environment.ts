/**
 * The environment (production or staging) a SQLite database belongs to. A server accepts only keys
 * of its own environment, and each API key records the environment it was made for, so a database's
 * keys tie it to one. Backups and restores also write it down, in the settings table as
 * `environment`, so that it is known without keys too, and stays what an operator decided when a
 * restore across environments was asked for by name (restore.ts). What is written down wins over
 * the keys; keys of both environments without it say nothing.
 */
import { ENVIRONMENTS, type Environment } from '../../domain/api-key.ts';
import type { Database } from './driver.ts';

export interface DatabaseEnvironment {
  /** Undefined when the database records none and its keys do not agree on one (or there are none). */
  environment: Environment | undefined;
  /** Where that comes from, in words for the operator. */
  basis: string;
}

const isEnvironment = (value: unknown): value is Environment => ENVIRONMENTS.includes(value as Environment);

export function environmentOf(db: Database): DatabaseEnvironment {
  const recorded = (db.prepare("SELECT value FROM settings WHERE name = 'environment'").get() as { value: string } | undefined)?.value;
  if (isEnvironment(recorded)) return { environment: recorded, basis: 'recorded in it' };
  const ofKeys = (db.prepare('SELECT DISTINCT environment FROM api_keys ORDER BY environment').all() as { environment: string }[])
    .map((row) => row.environment)
    .filter(isEnvironment);
  if (ofKeys.length === 1) return { environment: ofKeys[0], basis: 'the environment of its API keys' };
  const basis = ofKeys.length === 0 ? 'it records none and holds no API keys' : `it records none and holds keys of ${ofKeys.join(' and ')}`;
  return { environment: undefined, basis };
}

/** Writes down the environment the database at db belongs to from now on. */
export function recordEnvironment(db: Database, environment: Environment): void {
  db.prepare("INSERT INTO settings (name, value) VALUES ('environment', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value").run(
    environment,
  );
}
