/**
 * Who may read and write a database file and its copies. A database holds the cursor secret and the
 * hashes of every API key: a backup is made no more readable than the database it copies, and a
 * restored file keeps the mode and owner of the one it replaces, so that the service can still write
 * it after a restore run as root, and nobody can read it who could not before.
 */
import { chownSync, chmodSync, fstatSync, statSync } from 'node:fs';

export interface Ownership {
  /** The permission bits (0o777). */
  mode: number;
  uid: number;
  gid: number;
}

/** The mode and owner of the file at path, following links; undefined when there is none. */
export function ownershipOf(path: string): Ownership | undefined {
  const found = statSync(path, { throwIfNoEntry: false });
  return found && { mode: found.mode & 0o777, uid: found.uid, gid: found.gid };
}

/**
 * A restored file where there was no database: readable by its owner alone (0600), and owned by the
 * folder's owner and group when restore runs as root (a service's data folder is the service's: the
 * Dockerfile's /data belongs to the user the server runs as), else by whoever runs it.
 */
export function newDatabaseOwnership(folder: string): Ownership {
  const { uid, gid } = process.getuid?.() === 0 ? statSync(folder) : { uid: process.getuid?.() ?? -1, gid: process.getgid?.() ?? -1 };
  return { mode: 0o600, uid, gid };
}

/**
 * The mode of a copy of database, owned by the group copyGid: the database's read and write bits,
 * without those of its group when the copy's group is another, so that nobody outside the
 * database's readers can read the copy.
 */
export function copyMode(database: Ownership, copyGid: number): number {
  return database.mode & (copyGid === database.gid ? 0o666 : 0o606);
}

/** The group of the open file fd. */
export const groupOf = (fd: number): number => fstatSync(fd).gid;

/**
 * Gives the file at path the ownership (owner first: a change of owner may clear mode bits). Taking
 * another's ownership needs root: refused then, naming whom to run as.
 */
export function giveOwnership(path: string, ownership: Ownership, whose: string): void {
  const now = statSync(path);
  if (now.uid !== ownership.uid || now.gid !== ownership.gid) {
    try {
      chownSync(path, ownership.uid, ownership.gid);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EPERM') throw err;
      const owner = `user ${ownership.uid} and group ${ownership.gid}`;
      const cannot = `which this user (${process.getuid?.()}) cannot give the restored file`;
      throw new Error(`${whose} belongs to ${owner}, ${cannot}: run petstore restore as that user or as root`, { cause: err });
    }
  }
  chmodSync(path, ownership.mode);
}
