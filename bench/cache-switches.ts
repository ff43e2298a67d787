/**
 * The variables that turn a build's caches off, in the words of that build: the page cache by bytes
 * (PAGE_CACHE_BYTES), or by count in builds before it (PAGE_CACHE_SIZE, which later builds refuse by
 * name), and the pet cache where the build has one. Read from the built configuration, so a reference
 * build of any age and this one are each measured without their caches.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The text of the build's configuration modules: dist/config.js and, once split, dist/config/. */
function configText(checkout: string): string {
  const dist = join(checkout, 'dist');
  const folder = join(dist, 'config');
  const files = [
    join(dist, 'config.js'),
    ...(existsSync(folder) ? readdirSync(folder, { recursive: true }).map((f) => join(folder, String(f))) : []),
  ];
  return files
    .filter((f) => f.endsWith('.js') && existsSync(f))
    .map((f) => readFileSync(f, 'utf8'))
    .join('\n');
}

export function cachesOff(checkout: string): Record<string, string> {
  const config = configText(checkout);
  if (!config.includes('PAGE_CACHE_BYTES')) return { PAGE_CACHE_SIZE: '0' };
  return { PAGE_CACHE_BYTES: '0', ...(config.includes('PET_CACHE_BYTES') ? { PET_CACHE_BYTES: '0' } : {}) };
}

/** The page cache alone off: cachesOff without the pet cache's variable. */
export function pageCacheOff(checkout: string): Record<string, string> {
  const { PET_CACHE_BYTES: _petCache, ...page } = cachesOff(checkout);
  return page;
}
