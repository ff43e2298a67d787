/** Key bans on PostgreSQL; the ban lookup, on every request whose ban state is not cached, is a named statement. */
import type { Ban, BanStore } from '../store.ts';
import type { Query } from './query.ts';

export function postgresBans(query: Query): BanStore {
  return {
    async banKey(keyId: string, untilMs: number): Promise<void> {
      await query(
        `INSERT INTO bans (key_id, banned_until, created_at) VALUES ($1, $2, $3)
         ON CONFLICT (key_id) DO UPDATE SET banned_until = excluded.banned_until, created_at = excluded.created_at`,
        [keyId, untilMs, Date.now()],
      );
    },

    async banEndOf(keyId: string, nowMs: number): Promise<number | undefined> {
      const [row] = await query<{ banned_until: string }>(
        'SELECT banned_until FROM bans WHERE key_id = $1 AND banned_until > $2',
        [keyId, nowMs],
        'ban-end',
      );
      return row && Number(row.banned_until);
    },

    async listBans(nowMs: number): Promise<Ban[]> {
      const rows = await query<{ key_id: string; banned_until: string }>(
        'SELECT key_id, banned_until FROM bans WHERE banned_until > $1 ORDER BY key_id',
        [nowMs],
      );
      return rows.map((r) => ({ keyId: r.key_id, bannedUntil: new Date(Number(r.banned_until)) }));
    },

    async liftBan(keyId: string, nowMs: number): Promise<boolean> {
      const [row] = await query<{ banned_until: string }>('DELETE FROM bans WHERE key_id = $1 RETURNING banned_until', [keyId]);
      return row !== undefined && Number(row.banned_until) > nowMs;
    },
  };
}
