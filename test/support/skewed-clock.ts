/**
 * A server process whose wall clock is off: a module loaded before the program (NODE_OPTIONS=--import)
 * moves its Date.now by a fixed amount, and says so on standard error so that a test can check it was
 * loaded. performance.now() and timers stay real, as they do when NTP has set a machine's clock wrong.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { EnvOverrides } from './processes.ts';

/** The line a process with a skewed clock writes first on standard error. */
export const skewMarker = (skewMs: number) => `clock skewed by ${skewMs} ms`;

/** The environment that starts a node process with its Date.now skewMs off (the module is written into dir). */
export function skewedClockEnv(dir: string, skewMs: number): EnvOverrides {
  const file = join(dir, `clock-skewed-${skewMs}.mjs`);
  writeFileSync(
    file,
    [
      'const real = Date.now;',
      `Date.now = () => real() + ${skewMs};`,
      `process.stderr.write(${JSON.stringify(skewMarker(skewMs) + '\n')});`,
      '',
    ].join('\n'),
  );
  return { NODE_OPTIONS: `--import=${pathToFileURL(file).href}` };
}
