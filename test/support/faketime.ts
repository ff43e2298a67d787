/**
 * libfaketime (Debian's `faketime`), which moves one process's wall clock while it runs: the offset is read
 * from a file at every reading; the monotonic clock stays real (docs/reliability.md, "A clock that jumps").
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { EnvOverrides } from './processes.ts';
import { toolMissing } from './tools.ts';

export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

/**
 * A suite's skip option: skipped loudly where libfaketime is missing, and failed under CI=true, so a CI
 * machine without it cannot pass by skipping (test/support/tools.ts).
 */
export function skipWithoutLibfaketime(what = "the tests that move a server's clock"): false | string {
  return toolMissing(
    what,
    existsSync(LIBFAKETIME) ? undefined : `libfaketime is not installed at ${LIBFAKETIME}: apt-get install -y faketime`,
  );
}

export function requireLibfaketime(): void {
  if (!existsSync(LIBFAKETIME)) assert.fail(`CI=true needs libfaketime (${LIBFAKETIME}): apt-get install -y faketime`);
}

/** A server's environment with its wall clock at the offset written in offsetFile (`+86400`, `-3600`, `+0`). */
export function faketimeEnv(offsetFile: string): EnvOverrides {
  return {
    LD_PRELOAD: LIBFAKETIME,
    FAKETIME_TIMESTAMP_FILE: offsetFile,
    FAKETIME_NO_CACHE: '1',
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
  };
}
