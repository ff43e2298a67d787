/**
 * Opens the engine a DATABASE_URL names. The only place that chooses between engines. Each engine's
 * driver is loaded only when it is chosen, so a process does not carry the other one's code in memory.
 */
import type { Config } from '../config.ts';
import type { Store } from './store.ts';

/**
 * better-sqlite3 ships a binary built for Node-API 10, which Node.js has from 22.14 on; an older
 * release crashes loading it (a segmentation fault, no message), so it is refused here in words.
 */
const SQLITE_NODE_API = 10;

export async function openStore(config: Pick<Config, 'database' | 'sqliteSynchronous'>): Promise<Store> {
  const target = config.database;
  if (target.engine === 'sqlite') {
    if (Number(process.versions.napi) < SQLITE_NODE_API) {
      throw new Error(`SQLite needs Node.js 22.14 or newer (Node-API ${SQLITE_NODE_API}); this is Node.js ${process.version}`);
    }
    const { openSqliteStore } = await import('./sqlite/store.ts');
    return openSqliteStore({ path: target.path, synchronous: config.sqliteSynchronous });
  }
  const { openPostgresStore } = await import('./postgres/store.ts');
  return openPostgresStore({ url: target.url });
}
