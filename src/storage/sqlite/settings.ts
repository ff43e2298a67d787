/** Instance settings on SQLite: the secret every process on this file shares (cursors, key tags). */
import type { Store } from '../store.ts';
import type { Database } from './driver.ts';

export function sqliteSettings(db: Database): Pick<Store, 'cursorSecret'> {
  const selectSetting = db.prepare('SELECT value FROM settings WHERE name = ?');
  return {
    async cursorSecret(): Promise<string> {
      return (selectSetting.get('cursor_secret') as { value: string }).value;
    },
  };
}
