/**
 * A backup's checksum: the SHA-256 of its bytes, in FILE.sha256 beside it, as `sha256sum` writes it
 * (`HEX  NAME`), so that an operator can check a copy anywhere with `sha256sum -c`. SQLite's
 * integrity check sees only the structure of a file: bytes changed inside a row (a pet's name) pass
 * it, and only the checksum tells. Restore reads only the digest, not the name after it, so a backup
 * renamed together with its checksum file still checks.
 */
import { createHash } from 'node:crypto';
import { closeSync, fchmodSync, openSync, readFileSync, readSync, realpathSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { basename } from 'node:path';
import { partialPath, renameIntoPlace } from './partial-files.ts';

/**
 * Where the checksum of the backup at file is kept: beside the file itself, also when the path reaches it
 * through a symbolic link (`latest.db` leading to the day's backup); beside the path as given while there
 * is no file yet.
 */
export function checksumPath(file: string): string {
  let real = file;
  try {
    real = realpathSync(file);
  } catch {
    // not there (yet)
  }
  return `${real}.sha256`;
}

const CHUNK = 1 << 20;

/** Reads the file at source in chunks, handing each to `each` too; the SHA-256 of all it read. */
function hashThrough(source: string, each: (chunk: Buffer) => void = () => {}): string {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(CHUNK);
  const fd = openSync(source, 'r');
  try {
    for (let read; (read = readSync(fd, buffer, 0, CHUNK, null)) > 0;) {
      const chunk = buffer.subarray(0, read);
      hash.update(chunk);
      each(chunk);
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

export const sha256Of = (path: string): string => hashThrough(path);

/**
 * Copies source to target, a new file that only its owner can read (0600, or less with the umask),
 * as the copy may hold what the source's mode kept private; the SHA-256 of the bytes written.
 */
export function copyHashing(source: string, target: string): string {
  const fd = openSync(target, 'wx', 0o600);
  try {
    return hashThrough(source, (chunk) => {
      for (let written = 0; written < chunk.length;) written += writeSync(fd, chunk, written);
    });
  } finally {
    closeSync(fd);
  }
}

/** Writes the checksum of the backup at file beside it, with mode, renamed into place once complete. */
export function writeChecksum(file: string, digest: string, mode: number): void {
  const target = checksumPath(file);
  const partial = partialPath(target);
  try {
    const fd = openSync(partial, 'wx', 0o600);
    try {
      fchmodSync(fd, mode);
      writeFileSync(fd, `${digest}  ${basename(file)}\n`);
    } finally {
      closeSync(fd);
    }
    renameIntoPlace(partial, target);
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
}

/** One line as sha256sum writes it: the digest, a space, a space or `*`, a name. */
const LINE = /^([0-9a-fA-F]{64}) [ *][^\n]+\n?$/;

/** The digest the checksum file of the backup at file records, or undefined when there is none. */
export function readChecksum(file: string): string | undefined {
  const path = checksumPath(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`${path} cannot be read: ${(err as Error).message}`, { cause: err });
  }
  const digest = LINE.exec(text)?.[1];
  if (digest === undefined) throw new Error(`${path} is not a checksum file: it should be one line as sha256sum writes it (HEX  NAME)`);
  return digest.toLowerCase();
}
