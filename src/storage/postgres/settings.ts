/** Instance settings on PostgreSQL: the secret every instance on this database shares (cursors, key tags). */
import type { Store } from '../store.ts';
import type { Query } from './query.ts';

export function postgresSettings(query: Query): Pick<Store, 'cursorSecret'> {
  return {
    async cursorSecret(): Promise<string> {
      const [row] = await query<{ value: string }>("SELECT value FROM settings WHERE name = 'cursor_secret'");
      return row!.value;
    },
  };
}
