/**
 * Temporary directories: each test's SQLite files, certificates and generated files live in one of
 * its own, so tests running side by side never share a file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A new, empty directory under the system's temporary one. Given the test (or its context), it is
 * removed when that test ends; otherwise the caller removes it.
 */
export function tempDir(owner?: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-test-'));
  owner?.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
