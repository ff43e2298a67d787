/**
 * Opens the engine a DATABASE_URL names. The only place that chooses between engines. Each engine's
 * driver is loaded only when it is chosen, so a process does not carry the other one's code in memory.
 */
import type { Config } from '../config.ts';
import type { Store } from './store.ts';

export async function openStore(config: Pick<Config, 'database' | 'sqliteSynchronous'>): Promise<Store> {
  const target = config.database;
  if (target.engine === 'sqlite') {
    const { openSqliteStore } = await import('./sqlite/store.ts');
    return openSqliteStore({ path: target.path, synchronous: config.sqliteSynchronous });
  }
  const { openPostgresStore } = await import('./postgres/store.ts');
  return openPostgresStore({ url: target.url });
}
