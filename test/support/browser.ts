/**
 * Debian's Chromium, driven by playwright-core (which downloads no browser). A test without Chromium
 * on the machine is skipped with a loud banner, and fails under CI=true, where it must run.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** False (with the test skipped, or failed under CI=true) when Chromium is missing. */
export function chromiumPresent(t: TestContext): boolean {
  if (existsSync(CHROMIUM)) return true;
  console.log('#'.repeat(70) + `\n# SKIPPED: the browser test needs ${CHROMIUM} (apt-get install -y chromium)\n` + '#'.repeat(70));
  if (process.env.CI === 'true') assert.fail(`CI=true needs ${CHROMIUM}`);
  t.skip('no chromium');
  return false;
}

/** A headless Chromium that reaches nothing on its own (no updates, no background requests). */
export function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      ...extraArgs,
    ],
  });
}
