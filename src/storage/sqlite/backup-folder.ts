/**
 * A folder of dated backups, as `petstore backup --into DIR --keep N` and the shipped timer keep it
 * (deploy/systemd/petstore-backup.timer): each backup named by the moment it began, in UTC, so names
 * sort as times do; the oldest beyond N removed once a new one is complete. Only names of that pattern
 * are counted or removed: whatever else the folder holds is left alone. The newest one's time is what
 * the server reports as petstore_backup_last_success_timestamp_seconds (BACKUP_DIR).
 */
import { readdirSync, rmSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';

const NAME = /^petstore-(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z\.db$/;

/** petstore-20261206T031500Z.db: the UTC second a backup began. */
export function datedBackupName(at: Date): string {
  const stamp = at
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
  return `petstore-${stamp}.db`;
}

/** When the backup of that name began (ms), or undefined for a name that is not a dated backup's. */
function beganAt(name: string): number | undefined {
  const m = NAME.exec(name);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m.map(Number) as [number, ...number[]];
  const ms = Date.UTC(y!, mo! - 1, d, h, mi, s);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * The dated backups complete in a folder, oldest first: a name of the pattern with its checksum beside it
 * (backup.ts writes the checksum before it renames the copy into place, so a copy without one is not ours).
 */
function datedBackups(names: readonly string[]): { name: string; beganAt: number }[] {
  const present = new Set(names);
  return names
    .map((name) => ({ name, beganAt: beganAt(name) }))
    .filter((b): b is { name: string; beganAt: number } => b.beganAt !== undefined && present.has(`${b.name}.sha256`))
    .sort((a, b) => a.beganAt - b.beganAt);
}

/** Removes the oldest dated backups of folder beyond the newest `keep`, each with its checksum; the names removed. */
export function pruneDatedBackups(folder: string, keep: number): string[] {
  const backups = datedBackups(readdirSync(folder));
  const removed = backups.slice(0, Math.max(0, backups.length - keep)).map((b) => b.name);
  // The copy first: a checksum left alone by an interruption names nothing, a copy left alone would never be counted again.
  for (const name of removed) {
    const file = join(folder, name);
    rmSync(file, { force: true });
    rmSync(`${file}.sha256`, { force: true });
  }
  return removed;
}

/** A day: a backup dated later than that after now was named by a clock far ahead, not begun yet. */
const FUTURE_MS = 86_400_000;

/**
 * When the newest complete dated backup in folder began (ms since the epoch); 0 when there is none or no
 * folder. One dated more than a day ahead is left out: it would otherwise be the newest for ever.
 */
export async function newestDatedBackup(folder: string, nowMs = Date.now()): Promise<number> {
  let names: string[];
  try {
    names = await readdir(folder);
  } catch {
    return 0;
  }
  return datedBackups(names).findLast((b) => b.beganAt <= nowMs + FUTURE_MS)?.beganAt ?? 0;
}
