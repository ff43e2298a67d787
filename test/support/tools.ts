/**
 * A tool a test needs that the machine may lack (nginx, libfaketime, strace, an old Node.js): without
 * it the test is skipped with a loud banner, and under CI=true it fails instead, naming what to
 * install, since CI must run every test (.ci/run installs them).
 */
import assert from 'node:assert/strict';

/**
 * False when nothing is missing. Otherwise the banner, then a failure under CI=true, else the reason
 * for node:test's `skip` option. `missing` says what is missing and how to install it.
 */
export function toolMissing(what: string, missing: string | undefined): string | false {
  if (missing === undefined) return false;
  console.log('#'.repeat(70) + `\n# SKIPPED: ${what} (${missing})\n` + '#'.repeat(70));
  if (process.env.CI === 'true') assert.fail(`CI=true: ${what} cannot run: ${missing}`);
  return missing;
}

/** True when nothing is missing; otherwise the test is skipped loudly (failed under CI=true). */
export function requireTool(t: { skip(message: string): void }, what: string, missing: string | undefined): boolean {
  const why = toolMissing(what, missing);
  if (why === false) return true;
  t.skip(why);
  return false;
}
