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
import { startTestServer } from './support/servers.ts';

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
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
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

  const body = await page.locator('body').innerText();
  for (const operation of ['List animals', 'Add an animal', 'Get an animal (deprecated)']) assert.ok(body.includes(operation), operation);

  // Inside each operation's own section, not only in the introduction: getPet is marked deprecated
  // and its answers show the Deprecation and Sunset headers; every operation shows the rate-limit
  // headers of its expanded answers.
  const section = (operationId: string) => page.locator(`[id="operation/${operationId}"]`).first().innerText();
  const getPet = await section('getPet');
  assert.match(getPet, /Deprecated/, 'getPet carries the deprecated badge');
  for (const header of ['Deprecation', 'Sunset', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) {
    assert.ok(getPet.includes(header), `getPet's section shows ${header}`);
  }
  for (const operationId of ['listPets', 'createPet']) {
    const text = await section(operationId);
    assert.doesNotMatch(text, /Deprecated/, `${operationId} is not deprecated`);
    assert.ok(
      text.includes('X-RateLimit-Limit') && text.includes('Retry-After'),
      `${operationId}'s section shows the rate-limit headers and Retry-After`,
    );
  }

  // The error codes are in the Error schema of every error response: in listPets' section, the 429
  // answer is expanded; its schema lists them.
  const listPets = await section('listPets');
  for (const code of ['rate_limited', 'key_banned', 'invalid_request', 'unauthorized'])
    assert.ok(listPets.includes(code), `error code ${code} shown in listPets`);

  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: new URL('docs.png', ARTIFACTS).pathname, fullPage: false });
  assert.deepEqual(outside, [], 'the page fetched something from elsewhere');
  assert.deepEqual(cspViolations, [], 'the page broke its own Content-Security-Policy');
});
