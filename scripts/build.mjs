/**
 * `npm run build`: dist/ from src/ (tsc), the docs page's renderer into assets/, dist/cli/main.js made
 * executable; then the record of the inputs it was built from (build-record.mjs). `npm start` runs it
 * with --if-changed: it builds only when an input differs from that record or an output is missing,
 * and says in one line (on stderr, as the server's log is stdout) which it did.
 *
 * Plain JavaScript: it runs before anything is compiled, on every Node.js the project supports.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { buildDocsAssets } from './build-docs-assets.mjs';
import { record, ROOT, snapshot, staleness } from './build-record.mjs';

const ifChanged = process.argv.includes('--if-changed');
// Taken before building: a file saved while tsc runs is newer than its record, so the next start builds again.
const inputs = snapshot();

if (ifChanged) {
  const why = staleness(inputs);
  if (why === undefined) {
    console.error('build: dist/ and assets/ are up to date with their sources');
    process.exit(0);
  }
  console.error(`build: building dist/ and assets/: ${why}`);
}

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
// A type error fails the build (and the start) as it always has, though tsc still wrote dist/.
if (compiled.status !== 0) process.exit(compiled.status ?? 1);
buildDocsAssets();
chmodSync(join(ROOT, 'dist', 'cli', 'main.js'), 0o755);
record(inputs);
