/**
 * The documentation page in a real browser (Debian's Chromium driven by playwright-core, offline:
 * everything comes from this server): it renders the three operations and their request samples in
 * curl and JavaScript, and its console sends `GET /v1/pets` with the key typed into the page and shows
 * the 200 answer with the pets; no request leaves the server's origin and nothing breaks the page's
 * Content-Security-Policy; a link to `#operation/<operationId>` lands on that operation. A screenshot
 * of the console's answer is saved as a test artifact (test-artifacts/docs.png).
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { test } from 'node:test';
import { call, startTestServer } from '../support/servers.ts';
import { chromiumPresent, launchChromium } from '../support/browser.ts';

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url);

test(
  'GET /docs renders the operations and their samples, and its console lists the pets with a typed key',
  { timeout: 180_000 },
  async (t) => {
    if (!chromiumPresent(t)) return;
    const server = await startTestServer();
    t.after(() => server.close());
    const key = await server.key();
    const added = await call(server, 'POST', '/v1/pets', { key, body: { name: 'Biscuit the docs dog', categoryId: 1 } });
    assert.equal(added.status, 201, added.text);

    const browser = await launchChromium();
    t.after(() => browser.close());
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    // Every request the page attempts, whether or not it completes: one to another origin would be the
    // page reaching outside this server, even if the policy then refused it.
    const outside: string[] = [];
    const apiCalls: { url: string; authorization: string | undefined }[] = [];
    page.on('request', (r) => {
      const url = r.url();
      if (!url.startsWith(`${server.url}/`) && !url.startsWith('blob:') && !url.startsWith('data:')) outside.push(url);
      if (url.startsWith(`${server.url}/v1/pets`)) apiCalls.push({ url, authorization: r.headers().authorization });
    });
    const cspViolations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));

    const res = await page.goto(`${server.url}/docs`);
    assert.equal(res?.status(), 200);
    assert.match(res!.headers()['content-security-policy']!, /script-src 'self'/);
    // Each operation's section, named by its method and path, whichever way the document splits the
    // /v1 prefix between its servers and its paths.
    const section = (method: string, path: string) => page.locator(`[id$="/${method}${path}"], [id$="/${method}/v1${path}"]`).first();
    const listPets = section('GET', '/pets');
    await listPets.waitFor({ timeout: 90_000 });
    for (const [method, path, summary] of [
      ['GET', '/pets', 'List animals'],
      ['POST', '/pets', 'Add an animal'],
      ['GET', '/pets/{petId}', 'Get an animal (deprecated)'],
    ] as const) {
      await section(method, path).scrollIntoViewIfNeeded();
      await section(method, path).getByText(summary).first().waitFor();
    }

    await listPets.scrollIntoViewIfNeeded();
    // Its request sample: curl first, then JavaScript's fetch picked in the sample's client menu.
    const sample = listPets.locator('.request-card').first();
    const code = sample.locator('code').first();
    await code.waitFor();
    assert.match(await code.innerText(), /^curl '[^']*\/v1\/pets[^]*Authorization: Bearer /, 'a curl sample for GET /v1/pets');
    await sample.getByTestId('client-picker').click();
    await page.locator('[role="option"][id$="-js/fetch"]').click();
    await sample.getByText('fetch(').waitFor();
    assert.match(await code.innerText(), /^fetch\('[^']*\/v1\/pets[^]*Authorization: 'Bearer /, 'a JavaScript sample for GET /v1/pets');

    // The console: opened on listPets, the key typed into the Bearer Token field, the request sent.
    await listPets.getByRole('button', { name: /Test Request/ }).click();
    const client = page.getByRole('dialog').first();
    await client.getByText('Bearer Token').waitFor();
    await client.getByPlaceholder('Token', { exact: true }).fill(key);
    await client.locator('[data-addressbar-action="send"]').first().click();
    await client.getByText('200 OK').first().waitFor({ timeout: 30_000 });
    await client.getByText('Biscuit the docs dog').first().waitFor();
    // No way out of the page: the button that opens the document in the vendor's hosted client is hidden.
    assert.equal(await page.getByText('Open API Client').count(), 0);

    const sent = apiCalls.find((c) => new URL(c.url).pathname === '/v1/pets');
    assert.ok(sent, `the console sent GET /v1/pets (requests: ${JSON.stringify(apiCalls)})`);
    assert.equal(sent.authorization, `Bearer ${key}`);

    // Links made for the previous renderer (getPet's deprecation Link header among them) name an
    // operation as #operation/<operationId>: they still land on its section.
    const again = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    again.on('request', (r) => {
      if (!r.url().startsWith(`${server.url}/`) && !r.url().startsWith('data:')) outside.push(r.url());
    });
    await again.goto(`${server.url}/docs#operation/getPet`);
    // A string, not a function: the expression runs in the page, whose DOM types this project does not load.
    await again.waitForFunction(
      `(() => {
      const top = document.querySelector('[id$="/GET/pets/{petId}"], [id$="/GET/v1/pets/{petId}"]')?.getBoundingClientRect().top;
      return top !== undefined && top > -10 && top < 200;
    })()`,
      undefined,
      { timeout: 30_000 },
    );
    await again.close();

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL('docs.png', ARTIFACTS).pathname, fullPage: false });
    assert.deepEqual(outside, [], 'the page requested something from another origin');
    assert.deepEqual(cspViolations, [], 'the page broke its own Content-Security-Policy');
    assert.deepEqual(pageErrors, [], 'the page threw');
  },
);
