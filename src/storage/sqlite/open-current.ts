/**
 * Opening the file a path names now, with the lock the connection keeps. `petstore restore` swaps a
 * database by renaming a new file over its path, while it holds an exclusive lock on the old one
 * (restore.ts). A process that opened the path just before would wait for that lock and then run on
 * the replaced file, sharing the path's -wal and -shm (which SQLite finds by name) with processes on
 * the new one: that corrupts both. So the lock is asked for without waiting inside SQLite, the path
 * is checked before each try, and once it names another file that file is opened instead.
 *
 * Once the lock is taken the path cannot change (a restore needs that lock): a connection in WAL mode
 * keeps a shared lock on its file for as long as it is open, and restore's exclusive lock is refused.
 */
import { closeSync, fchmodSync, openSync } from 'node:fs';
import { DatabaseSync, isBusy, type Database } from './driver.ts';
import { fileAt } from './file-identity.ts';

/**
 * A database the service creates is its owner's alone, whatever the umask: it holds the keys' hashes and
 * the cursor and tag secret. SQLite gives its -wal and -shm the database's mode, and backups copy it.
 * Anything but a file already there is left to SQLite to report as it opens.
 */
function createPrivately(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o600);
  } catch {
    return;
  }
  try {
    fchmodSync(fd, 0o600); // the umask may have taken bits from 0600 (0277, say): the owner keeps both
  } finally {
    closeSync(fd);
  }
}

/** At start-up or in a command only: a short blocking pause, as nothing else runs on the thread yet. */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * The database at path, with `lock` run on it: statements that take the lock the caller needs and
 * keeps. While another process holds a conflicting lock, `lock` is tried again every 20 ms until
 * waitMs has passed (0: once), then its SQLITE_BUSY is thrown. The connection's busy_timeout is 0.
 */
export function openCurrent(path: string, lock: (db: Database) => void, waitMs: number): Database {
  const deadline = performance.now() + waitMs;
  for (;;) {
    const before = fileAt(path);
    if (before === undefined && path !== ':memory:') createPrivately(path);
    const db = new DatabaseSync(path);
    // Opening created the file if there was none; ':memory:' has no file at all.
    const opened = before ?? fileAt(path);
    try {
      db.exec('PRAGMA busy_timeout = 0');
      for (;;) {
        if (fileAt(path) !== opened) break;
        try {
          lock(db);
        } catch (err) {
          if (fileAt(path) !== opened) break;
          if (!isBusy(err) || performance.now() >= deadline) throw err;
          pause(20);
          continue;
        }
        if (fileAt(path) !== opened) break;
        return db;
      }
    } catch (err) {
      db.close();
      throw err;
    }
    db.close(); // the path names another file now: open that one
  }
}
