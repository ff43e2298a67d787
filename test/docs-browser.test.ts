/**
 * The documentation page in a real browser (Debian's Chromium driven by playwright-core, offline:
 * everything comes from this server): it renders the three operations, the deprecation of getPet, the
 * rate-limit headers and the error codes, and a screenshot is saved as a test artifact
 * (test-artifacts/docs.png).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { test } from 'node:test';
import { chromium } from 'playwright-core';
import { startTestServer } from './helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = new URL('../test-artifacts/', import.meta.url);

test('GET /docs renders the operations, the deprecation, the rate-limit headers and the error codes', { timeout: 120_000 }, async (t) => {
  if (!existsSync(CHROMIUM)) {
    console.log('#'.repeat(70) + `\n# SKIPPED: the browser test needs ${CHROMIUM} (apt-get install -y chromium)\n` + '#'.repeat(70));
    if (process.env.CI === 'true') assert.fail(`CI=true needs ${CHROMIUM}`);
    t.skip('no chromium');
    return;
  }
  const server = await startTestServer();
  t.after(() => server.close());
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
  t.after(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const outside: string[] = [];
  const cspViolations: string[] = [];
  // Only requests that completed count: the renderer's branding image on its CDN is refused by the
  // page's own policy (img-src 'self'), so the page stays offline.
  page.on('requestfinished', (r) => {
    if (!r.url().startsWith(server.url) && !r.url().startsWith('blob:') && !r.url().startsWith('data:')) outside.push(r.url());
  });
  page.on('console', (m) => {
    // The refused branding image is the one expected report; anything else is a policy the page breaks.
    if (/Content Security Policy/i.test(m.text()) && !/img-src/.test(m.text())) cspViolations.push(m.text());
  });

  const res = await page.goto(`${server.url}/docs`);
  assert.equal(res?.status(), 200);
  assert.match(res!.headers()['content-security-policy']!, /script-src 'self'/);
  await page.locator('h2', { hasText: 'List animals' }).first().waitFor({ timeout: 60_000 });

  const text = async () => page.locator('body').innerText();
  let body = await text();
  for (const operation of ['List animals', 'Add an animal', 'Get an animal (deprecated)']) assert.ok(body.includes(operation), operation);
  assert.match(body, /Deprecated/i);
  assert.match(body, /X-RateLimit-Limit/);

  // The error codes are in the Error schema of every error response: open the 429 of listPets.
  await page.locator('button:has-text("429")').first().click();
  body = await text();
  for (const code of ['rate_limited', 'key_banned', 'invalid_request', 'unauthorized']) assert.ok(body.includes(code), `error code ${code} shown`);

  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: new URL('docs.png', ARTIFACTS).pathname, fullPage: false });
  assert.deepEqual(outside, [], 'the page fetched something from elsewhere');
  assert.deepEqual(cspViolations, [], 'the page broke its own Content-Security-Policy');
});
