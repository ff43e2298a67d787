/**
 * Packages the benchmarks measure against without the project depending on them (json-server, and
 * the libraries the platform replaced): each is installed on first use, at a fixed version, into a
 * cache folder outside the checkout, and found there afterwards.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** The folder holding `name`'s package (its package.json), installed at `version` if it is not yet. */
export function referencePackage(name: string, version: string): string {
  const prefix = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'petstore-bench', `${name.replace('/', '+')}-${version}`);
  const dir = join(prefix, 'node_modules', name);
  if (!existsSync(join(dir, 'package.json'))) {
    console.log(`installing ${name} ${version} into ${prefix}`);
    execFileSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-audit', '--no-fund', `${name}@${version}`], {
      stdio: 'inherit',
    });
  }
  return dir;
}
