/**
 * A copy of some of the project's files in a temporary directory, sharing this checkout's node_modules,
 * for a test that runs the project's own npm scripts (npm start, npm run dev) where builds, edits and
 * databases touch nothing of the checkout or of the tests running beside it; and the environment npm
 * runs there with.
 */
import { cpSync, existsSync, realpathSync, symlinkSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EnvOverrides } from './processes.ts';
import { tempDir, type Owner } from './temp.ts';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The paths (files or folders, from the project's root) copied into a new temporary directory, removed
 * when the owner ends, with a link to this checkout's node_modules. A path the checkout lacks (assets/
 * before a first build) is left out.
 */
export function projectCopy(owner: Owner, paths: string[]): string {
  const dir = tempDir(owner);
  for (const path of paths) {
    if (existsSync(join(ROOT, path))) cpSync(join(ROOT, path), join(dir, path), { recursive: true });
  }
  symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(dir, 'node_modules'));
  return dir;
}

/**
 * What npm runs with, on top of the test's settings: the Node.js running the tests first on PATH (npm's
 * scripts run the `node` they find there), and none of an npm test run's own settings (npm_config_*).
 */
export function npmEnv(overrides: EnvOverrides): EnvOverrides {
  const env: EnvOverrides = { PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}` };
  for (const name of Object.keys(process.env)) if (name.startsWith('npm_config_')) env[name] = undefined;
  return { ...env, ...overrides };
}
