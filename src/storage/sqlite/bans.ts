/** Key bans on SQLite, each statement prepared once. */
import type { Ban, BanStore } from '../store.ts';
import { exact, type Database } from './driver.ts';
import type { SqliteWriter } from './writer.ts';

export function sqliteBans(db: Database, writer: SqliteWriter): BanStore {
  const upsertBan = exact(
    db.prepare(`INSERT INTO bans (key_id, banned_until, created_at) VALUES (?, ?, ?)
      ON CONFLICT (key_id) DO UPDATE SET banned_until = excluded.banned_until, created_at = excluded.created_at`),
  );
  const selectBanEnd = db.prepare('SELECT banned_until FROM bans WHERE key_id = ? AND banned_until > ?');
  const selectBans = db.prepare('SELECT key_id, banned_until FROM bans WHERE banned_until > ? ORDER BY key_id');
  const deleteBan = db.prepare('DELETE FROM bans WHERE key_id = ? RETURNING banned_until');
  return {
    async banKey(keyId: string, untilMs: number): Promise<void> {
      await writer.write(() => upsertBan.run(keyId, untilMs, Date.now()));
    },

    async banEndOf(keyId: string, nowMs: number): Promise<number | undefined> {
      return (selectBanEnd.get(keyId, nowMs) as { banned_until: number } | undefined)?.banned_until;
    },

    async listBans(nowMs: number): Promise<Ban[]> {
      return (selectBans.all(nowMs) as { key_id: string; banned_until: number }[]).map((r) => ({
        keyId: r.key_id,
        bannedUntil: new Date(r.banned_until),
      }));
    },

    async liftBan(keyId: string, nowMs: number): Promise<boolean> {
      const until = ((await writer.write(() => deleteBan.get(keyId))) as { banned_until: number } | undefined)?.banned_until;
      return until !== undefined && until > nowMs;
    },
  };
}
