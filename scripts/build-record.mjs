/**
 * What the build is made from, and whether its outputs still match: the record of each input's size
 * and modification time at the last build (dist/.build-inputs.json), against the files as they are now.
 * `npm start` builds only when they differ (scripts/build.mjs --if-changed), as make would, so a
 * touched file counts as changed; tsc's own incremental build then re-emits only what really changed.
 *
 * Plain JavaScript: it runs before anything is compiled, on every Node.js the project supports.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DOCS_ASSETS, rendererSource } from './build-docs-assets.mjs';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RECORD = join(ROOT, 'dist', '.build-inputs.json');

/** What `npm start` runs and serves: without any of these, there is no build to reuse. */
const OUTPUTS = ['dist/cli/main.js', ...DOCS_ASSETS];

/** Files under a folder of the project, as paths from its root with forward slashes. */
function filesUnder(folder) {
  return readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)).split(sep).join('/'));
}

/** A file in node_modules that a build step reads, or undefined where that package is not installed. */
function installed(resolve) {
  try {
    return relative(ROOT, resolve()).split(sep).join('/');
  } catch {
    return undefined;
  }
}

/**
 * The build's inputs: the sources tsc compiles (every file under src/ but the folders' READMEs), its
 * configuration, package.json (the module type tsc compiles for, and the version the server reports),
 * the build's own scripts, the compiler's version and the renderer's bundle.
 */
export function buildInputs() {
  const require = createRequire(import.meta.url);
  return [
    ...filesUnder('src').filter((file) => !file.endsWith('.md')),
    'tsconfig.json',
    'tsconfig.build.json',
    'package.json',
    'scripts/build.mjs',
    'scripts/build-record.mjs',
    'scripts/build-docs-assets.mjs',
    installed(() => require.resolve('typescript/package.json')) ?? 'node_modules/typescript/package.json',
    installed(rendererSource) ?? 'node_modules/@scalar/api-reference',
  ].sort();
}

/** Each input's size and modification time; null for one that is missing. */
export function snapshot() {
  const files = {};
  for (const file of buildInputs()) {
    try {
      const { size, mtimeMs } = statSync(join(ROOT, file));
      files[file] = [size, mtimeMs];
    } catch {
      files[file] = null;
    }
  }
  return files;
}

/** Why the last build no longer matches `now`, in a few words; undefined when it does. */
export function staleness(now) {
  for (const output of OUTPUTS) if (!existsSync(join(ROOT, output))) return `${output} is missing`;
  let recorded;
  try {
    recorded = JSON.parse(readFileSync(RECORD, 'utf8'));
  } catch {
    return 'no record of a previous build';
  }
  for (const [file, stat] of Object.entries(now)) {
    if (!(file in recorded)) return `${file} is new since the last build`;
    if (JSON.stringify(recorded[file]) !== JSON.stringify(stat)) return `${file} changed since the last build`;
  }
  for (const file of Object.keys(recorded)) if (!(file in now)) return `${file} was removed since the last build`;
  return undefined;
}

/** Records the inputs as they were when the build that just ended began. */
export function record(before) {
  writeFileSync(RECORD, `${JSON.stringify(before, null, 1)}\n`);
}
