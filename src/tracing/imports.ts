/**
 * A module hook, so the instrumentations see ESM imports of CommonJS packages (pg, ioredis), which bypass the
 * `require` they patch. Registered before the server loads; it intercepts only the packages named.
 */
import module from 'node:module';
import { register, supportsSyncHooks } from 'import-in-the-middle/register-hooks.mjs';

export function interceptImports(packages: string[]): void {
  // In-thread hooks where Node.js runs them correctly (Node.js 26, recent 22 and 24 releases);
  // older releases of the supported lines have only the loader thread, which Node.js 26 deprecates.
  if (supportsSyncHooks()) register({ include: packages });
  else module.register('import-in-the-middle/hook.mjs', import.meta.url, { data: { include: packages } });
}
