/**
 * Files written aside and renamed into place, for backup and restore: a copy is written beside its
 * target as TARGET.partial-HOST-PID and becomes TARGET only once it is complete and on disk, so a
 * crash or a kill leaves either the old TARGET or the new one, never half of one. A process killed
 * while it wrote leaves its partial file behind; the next backup or restore into that folder removes
 * those whose process (on this host) is gone, so nobody mistakes one for a backup.
 */
import { closeSync, fsyncSync, openSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';

/** What SQLite may keep beside a database file while it is open or after a crash. */
export const SIBLINGS = ['-wal', '-shm', '-journal'] as const;

/** A partial file's name, and its SQLite siblings': the target's name, the host and the process. */
const PARTIAL = /^.+\.partial-(.+)-(\d+)(?:-wal|-shm|-journal)?$/;

/** Where this process writes a copy that is to become target. */
export function partialPath(target: string): string {
  return `${target}.partial-${hostname()}-${process.pid}`;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // running, as another user
  }
}

/** Removes the partial files in folder left by processes of this host that are no longer running. */
export function removeStalePartials(folder: string): void {
  for (const name of readdirSync(folder)) {
    const match = PARTIAL.exec(name);
    if (match && match[1] === hostname() && Number(match[2]) !== process.pid && !isRunning(Number(match[2]))) {
      rmSync(join(folder, name), { force: true });
    }
  }
}

/** Removes a database file and whatever SQLite kept beside it; nothing missing is an error. */
export function removeWithSiblings(path: string): void {
  for (const suffix of ['', ...SIBLINGS]) rmSync(`${path}${suffix}`, { force: true });
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Makes the complete file at partial the file at target: its content reaches the disk first, then the
 * rename, then the folder's entry, so after a power loss target is the old file or the whole new one.
 */
export function renameIntoPlace(partial: string, target: string): void {
  fsyncPath(partial);
  renameSync(partial, target);
  fsyncPath(dirname(target));
}
