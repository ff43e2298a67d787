/**
 * The documentation page in a real browser (Debian's Chromium driven by playwright-core, offline:
 * everything comes from this server), in a 1280 by 800 window: it renders the three operations, and
 * only those, with their request samples in curl and JavaScript, shows the int64 range digit for digit
 * and never a rounded one, and its console's first Send is `GET /v1/pets` without a status filter, with
 * the key typed into the page, and shows the 200 answer with the pets; nothing on the page is wider
 * than the window, samples wrap within their card and the response tabs within theirs; the service has
 * one name, a field one description, and the text names no repository file; no request leaves the
 * server's origin and nothing breaks the page's Content-Security-Policy; a link to
 * `#operation/<operationId>` lands on that operation. A screenshot of the console's answer is saved as
 * a test artifact (test-artifacts/docs.png). And the page can be viewed 60 times within one minute from
 * one address, every view rendering.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { call, startTestServer } from '../support/servers.ts';
import { chromiumPresent, launchChromium } from '../support/browser.ts';

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url);
/** A file of the repository, which a reader of the page cannot open: `docs/api-document.md`, `README.md`. */
const REPOSITORY_PATH = /\b(?:docs|src|test|scripts|examples|client|deploy)\/[\w-]+|\b[\w-]+\.(?:md|ts|mjs)\b/;

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
    // Listed only when the console's first request has no status filter.
    const sold = await call(server, 'POST', '/v1/pets', { key, body: { name: 'Pickles the sold cat', categoryId: 1, status: 'sold' } });
    assert.equal(sold.status, 201, sold.text);

    const browser = await launchChromium();
    t.after(() => browser.close());
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
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
    // Those three and nothing else: no HEAD, OPTIONS or document entries ("Methods of this path").
    assert.deepEqual(await operationSections(page), ['GET /pets', 'POST /pets', 'GET /pets/{petId}']);
    assert.equal(await page.getByText('Methods of this path').count(), 0);

    // One name for the service: the window's title, the page's heading, the document's and the README's.
    const openapi = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8')) as { info: { title: string } };
    const name = openapi.info.title;
    assert.equal(/^# (.+)$/m.exec(readFileSync(new URL('../../README.md', import.meta.url), 'utf8'))?.[1], name, "the README's name");
    assert.equal(await page.title(), name, "the window's title");
    assert.equal((await page.locator('h1').first().innerText()).trim(), name, "the page's heading");

    // The status filter and createPet's status field each say what they mean there, once: a description
    // of PetStatus's own would show beside each.
    assert.deepEqual(await statusDescriptions(page), ['Only pets with this status.', 'Availability status; available when omitted.']);

    // At 1280 pixels nothing is wider than the window, and every operation's samples and response tabs
    // fit their cards (a scroll box without a visible scroll bar hides what runs past its edge).
    for (const [method, path] of [
      ['GET', '/pets'],
      ['POST', '/pets'],
      ['GET', '/pets/{petId}'],
    ] as const) {
      await section(method, path).scrollIntoViewIfNeeded();
      await section(method, path).locator('.request-card pre').first().waitFor();
      assert.deepEqual(await tooWide(page), [], `${method} ${path} in view`);
    }

    // int64 ids: the range digit for digit, as the document says it; never 2^63 - 1 rounded as a double
    // (9223372036854776000), which a reader would copy and get a 400 for.
    const getPet = section('GET', '/pets/{petId}');
    await getPet.scrollIntoViewIfNeeded();
    assert.match(await getPet.innerText(), /petId[^]*1 to 9223372036854775807/);
    const createPet = section('POST', '/pets');
    await createPet.scrollIntoViewIfNeeded();
    assert.match(await createPet.innerText(), /categoryId[^]*1 to 9223372036854775807/);
    const text = await page.locator('body').innerText();
    assert.doesNotMatch(text, /9223372036854776000|9\.223372036854776e\+?18/);
    // The introduction names the default page size, and no file a reader of the page cannot open.
    assert.match(text, /returns 20 pets unless limit asks/);
    assert.doesNotMatch(text, REPOSITORY_PATH);

    await listPets.scrollIntoViewIfNeeded();
    // Its request sample: curl first, then JavaScript's fetch picked in the sample's client menu.
    const sample = listPets.locator('.request-card').first();
    const code = sample.locator('code').first();
    await code.waitFor();
    assert.match(await code.innerText(), /^curl '[^']*\/v1\/pets[^]*Authorization: Bearer /, 'a curl sample for GET /v1/pets');
    assert.doesNotMatch(await code.innerText(), /status=/, 'the sample lists pets of every status');
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
    await client.getByText('Pickles the sold cat').first().waitFor();
    // No way out of the page: the button that opens the document in the vendor's hosted client is hidden.
    assert.equal(await page.getByText('Open API Client').count(), 0);

    const sent = apiCalls.find((c) => new URL(c.url).pathname === '/v1/pets');
    assert.ok(sent, `the console sent GET /v1/pets (requests: ${JSON.stringify(apiCalls)})`);
    assert.equal(sent.authorization, `Bearer ${key}`);
    assert.equal(new URL(sent.url).searchParams.get('status'), null, `the first Send has no status filter: ${sent.url}`);

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

/** The description of every field named `status` that the page shows, in order, each as one text. */
async function statusDescriptions(page: Page): Promise<string[]> {
  // A string, not a function: the expression runs in the page, whose DOM types this project does not load.
  return (await page.evaluate(`[...document.querySelectorAll('.property')]
    .filter((p) => p.querySelector(':scope > .property-heading .property-name')?.textContent.trim() === 'status')
    .map((p) => p.querySelector(':scope > .property-description')?.innerText.trim() ?? '')`)) as string[];
}

/**
 * What runs past the window's right edge, or past the edge of its own box where the renderer hides
 * the overflow in a scroll box without a visible scroll bar: the request samples' code blocks and the
 * response examples' status tabs. Empty when everything fits.
 */
async function tooWide(page: Page): Promise<string[]> {
  // A string, not a function: the expression runs in the page, whose DOM types this project does not load.
  return (await page.evaluate(`(() => {
    const width = document.documentElement.clientWidth;
    const name = (e) => e.tagName.toLowerCase() + '.' + String(e.className).split(' ')[0] + ' "' + (e.textContent ?? '').trim().slice(0, 40) + '"';
    const found = [];
    if (document.documentElement.scrollWidth > width) found.push('the document scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + width);
    for (const e of document.querySelectorAll('body *')) {
      const box = e.getBoundingClientRect();
      if (box.width > 0 && box.right > width + 0.5) found.push(name(e) + ' ends at ' + Math.round(box.right) + ' > ' + width);
    }
    const boxes = [...document.querySelectorAll('.request-card pre')].map((pre) => pre.parentElement)
      .concat([...document.querySelectorAll('.response-card [role="tablist"]')]);
    for (const box of boxes) {
      if (box.scrollWidth > box.clientWidth) found.push(name(box) + ' hides ' + (box.scrollWidth - box.clientWidth) + ' px past its edge');
    }
    return found.slice(0, 10);
  })()`)) as string[];
}

/** The operations the page shows, as `METHOD /path`, in the order shown. */
async function operationSections(page: Page): Promise<string[]> {
  // A string, not a function: the expression runs in the page, whose DOM types this project does not load.
  const ids = (await page.evaluate(`[...document.querySelectorAll('[id*="/tag/"]')].map((e) => e.id)`)) as string[];
  return [...new Set(ids.map((id) => /\/tag\/[^/]+\/([A-Z]+)(\/[^.]*)$/.exec(id)).flatMap((m) => (m ? [`${m[1]} ${m[2]}`] : [])))];
}

/**
 * 60 views of the page from one address within one minute: the server's clock is the test's and does
 * not move, so every request falls in one minute window. Each of six browsers (contexts, with caches of
 * their own) opens the page cold once and nine times more, as readers in one office behind one address
 * would. The page, its scripts and the document share the documentation's own bucket
 * (DOCS_RATE_LIMIT_PER_MINUTE), never the keyless API requests' 60: before, each view spent two of
 * those 60, and the 31st showed a raw 429.
 */
test('the page can be viewed 60 times within one minute from one address, every view rendering', { timeout: 900_000 }, async (t) => {
  if (!chromiumPresent(t)) return;
  const server = await startTestServer();
  t.after(() => server.close());
  const startedAt = server.clock.now();
  const browser = await launchChromium();
  t.after(() => browser.close());

  const refused: string[] = [];
  let requests = 0;
  const views = async (browser: Browser, count: number): Promise<number> => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      page.on('response', (r) => {
        requests++;
        if (r.status() === 429) refused.push(r.url());
      });
      let rendered = 0;
      for (let i = 0; i < count; i++) {
        const res = await page.goto(`${server.url}/docs`, { waitUntil: 'commit' });
        assert.equal(res?.status(), 200);
        await page.locator('[id$="/GET/pets"]').first().getByText('List animals').first().waitFor({ timeout: 120_000 });
        rendered++;
      }
      return rendered;
    } finally {
      await context.close();
    }
  };
  // Two browsers at a time: the machine has two cores.
  const rendered: number[] = [];
  for (let round = 0; round < 3; round++) rendered.push(...(await Promise.all([views(browser, 10), views(browser, 10)])));

  assert.equal(
    rendered.reduce((a, b) => a + b),
    60,
  );
  assert.deepEqual(refused, [], 'no answer was a 429');
  assert.equal(server.clock.now(), startedAt, 'all in one minute window of the server');
  const page = await call(server, 'GET', '/docs');
  const spent = 300 - Number(page.headers.get('x-ratelimit-remaining'));
  assert.ok(spent > 60, `the views cost ${spent} requests of the documentation's bucket, more than the keyless API's 60`);
  // The keyless API bucket of the address is untouched.
  const api = await call(server, 'GET', '/v1/pets');
  assert.equal(api.status, 401);
  assert.equal(api.headers.get('x-ratelimit-remaining'), '59');
  console.log(`# 60 views rendered; ${requests} answers to the browsers, ${spent} requests charged to the documentation's bucket`);
});
