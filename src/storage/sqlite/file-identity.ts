/**
 * Which file a path names. A file is its device and inode together: inode numbers are counted per
 * file system, so the first file of one volume has the same number as the first file of another.
 */
import { lstatSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';

/** The file (device and inode) the path names now, following links, or undefined when there is none. */
export function fileAt(path: string): string | undefined {
  const found = statSync(path, { bigint: true, throwIfNoEntry: false });
  return found && `${found.dev}:${found.ino}`;
}

/** True when both paths name one existing file. */
export function sameFile(a: string, b: string): boolean {
  const file = fileAt(a);
  return file !== undefined && file === fileAt(b);
}

/** The folder with its links followed; refused by name when there is none (path led there). */
function existingFolder(folder: string, path: string): string {
  try {
    return realpathSync(folder);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    throw new Error(`${path} leads into ${folder}, which is not an existing folder`, { cause: err });
  }
}

/**
 * The absolute path of the file that path names once its symbolic links are followed, also when it
 * does not exist yet (a link to a file still to be made). Replacing that file leaves the links as
 * they are; renaming a file over the link itself would turn it into a regular file and leave the data
 * it led to behind. SQLite follows links the same way: a -wal and a -shm sit beside the file this gives.
 */
export function followLinks(path: string): string {
  let current = resolve(path);
  for (let hops = 0; ; hops++) {
    try {
      return realpathSync(current);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    // Missing: current is a dangling link, or a file not made yet in a folder that may be one.
    const folder = existingFolder(dirname(current), path);
    const here = resolve(folder, basename(current));
    if (!lstatSync(here, { throwIfNoEntry: false })?.isSymbolicLink()) return here;
    if (hops === 40) throw new Error(`${path}: too many levels of symbolic links`);
    current = resolve(folder, readlinkSync(here));
  }
}
