/**
 * The service is ESM, and an ESM `import` of a CommonJS package (pg, ioredis) does not pass through
 * `require`, where the instrumentations patch packages by default. A module hook lets them see those
 * imports too; it must be in place before the packages are first imported, so it is registered
 * before the server is loaded. Only the packages named are intercepted: every other module loads as
 * it would without tracing.
 */
import module from 'node:module';
import { register, supportsSyncHooks } from 'import-in-the-middle/register-hooks.mjs';

export function interceptImports(packages: string[]): void {
  // In-thread hooks where Node.js runs them correctly (Node.js 26, recent 22 and 24 releases);
  // older releases of the supported lines have only the loader thread, which Node.js 26 deprecates.
  if (supportsSyncHooks()) register({ include: packages });
  else module.register('import-in-the-middle/hook.mjs', import.meta.url, { data: { include: packages } });
}
