/** Opens the engine a DATABASE_URL names. The only place that chooses between engines. */
import type { Config } from '../config.js';
import { openPostgresStore } from './postgres/store.js';
import { openSqliteStore } from './sqlite/store.js';
import type { Store } from './store.js';

export async function openStore(config: Pick<Config, 'database' | 'sqliteSynchronous'>): Promise<Store> {
  const target = config.database;
  if (target.engine === 'sqlite') {
    return openSqliteStore({ path: target.path, synchronous: config.sqliteSynchronous });
  }
  return openPostgresStore({ url: target.url });
}
