/** The package's version, as package.json gives it: one level above src/ and dist/ alike. */
import { readFileSync } from 'node:fs';

export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return String(manifest.version);
}
