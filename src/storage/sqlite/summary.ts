/** What a backup, a restore or a verification reports a file holds: pets, API keys, environment, schema version, size. */
import { statSync } from 'node:fs';
import type { Database } from './driver.ts';
import { environmentOf, type DatabaseEnvironment } from './environment.ts';

export interface DatabaseSummary {
  pets: number;
  keys: number;
  /** The highest migration recorded (migrations.ts). */
  schemaVersion: number;
  /** The environment the file belongs to, when it tells (environment.ts). */
  environment: DatabaseEnvironment;
  bytes: number;
}

/** The newest migration the file records; a file without the service's bookkeeping is refused by name. */
export function schemaVersionOf(db: Database, path: string): number {
  const table = db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (table === undefined) throw new Error(`${path} is not a petstore database: it has no schema_migrations table`);
  const { version } = db.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number | null };
  return version ?? 0;
}

/** The counts of a file made by backup or checked by restore, read through db. */
export function summarise(db: Database, path: string): DatabaseSummary {
  const count = (table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  return {
    schemaVersion: schemaVersionOf(db, path),
    pets: count('pets'),
    keys: count('api_keys'),
    environment: environmentOf(db),
    bytes: statSync(path).size,
  };
}
