/**
 * The SDK in a real browser (Debian's Chromium driven by playwright-core): a page served by this test
 * from its own small static server, so on another origin than the API, imports the built SDK as an ES
 * module with no bundler and calls the service (started with CORS_ORIGINS naming that page's origin)
 * with a key: it creates pets (one twice under the same Idempotency-Key), gets one, lists them page by
 * page through the exposed Link header and catches a typed error. The page writes what it saw; the
 * test asserts it. Twice: from a secure context (http://127.0.0.1), and from a page that is not one
 * (a plain-http host name), where crypto.randomUUID does not exist and the SDK makes its
 * Idempotency-Keys from crypto.getRandomValues.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { keysCreate, startServerProcess } from '../support/processes.ts';
import { atEnd, tempDir } from '../support/temp.ts';
import { chromiumPresent, launchChromium } from '../support/browser.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** A name only this browser resolves (to 127.0.0.1): a plain-http page there is not a secure context. */
const INSECURE_HOST = 'sdk-page.test';

/**
 * The page: it reads the API's address and key from its fragment (never sent to any server), runs
 * the SDK and writes a JSON report into #report.
 */
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>SDK in the browser</title>
<pre id="report"></pre>
<script type="module">
  import { PetstoreClient, PetstoreError } from '../sdk/index.js';

  const params = new URLSearchParams(location.hash.slice(1));
  const api = params.get('api');
  const apiKey = params.get('key');
  const report = { secureContext: isSecureContext, hasRandomUUID: typeof crypto.randomUUID === 'function' };
  try {
    const client = new PetstoreClient({ baseUrl: api + '/v1', apiKey });
    const keys = [];
    const recording = new PetstoreClient({
      baseUrl: api,
      apiKey,
      fetch: (input, init) => {
        if (init.headers['idempotency-key']) keys.push(init.headers['idempotency-key']);
        return fetch(input, init);
      },
    });
    report.first = await recording.createPet({ name: 'Browser ' + params.get('run'), categoryId: 9223372036854775807n });
    report.again = await client.createPet({ name: 'Keyed', categoryId: 3n }, { idempotencyKey: 'browser-' + params.get('run') });
    report.replay = await client.createPet({ name: 'Keyed', categoryId: 3n }, { idempotencyKey: 'browser-' + params.get('run') });
    report.got = await client.getPet(report.first.id);
    report.listed = [];
    for await (const pet of client.listPets({ limit: 1 })) report.listed.push(pet.name);
    try {
      await client.getPet(report.first.id + 1000n);
    } catch (err) {
      report.error = { isPetstoreError: err instanceof PetstoreError, status: err.status, code: err.code, requestId: err.requestId };
    }
    report.generatedKeys = keys;
  } catch (err) {
    report.failure = String(err && err.stack ? err.stack : err);
  }
  const el = document.getElementById('report');
  el.textContent = JSON.stringify(report, (_key, value) => (typeof value === 'bigint' ? value.toString() + 'n' : value));
  el.dataset.done = 'true';
</script>
`;

/** Serves the page at / and the built SDK under /sdk/, on a port of its own. */
async function startPageServer(sdkDir: string): Promise<{ server: Server; port: number }> {
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://page.invalid').pathname;
    if (path === '/') {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
      return;
    }
    const file = /^\/sdk\/([\w.-]+\.js)$/.exec(path)?.[1];
    if (file && existsSync(join(sdkDir, file))) {
      response.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(readFileSync(join(sdkDir, file)));
      return;
    }
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

test(
  'the built SDK runs in Chromium from another origin: creates idempotently, gets, lists by pages, typed errors',
  { timeout: 180_000 },
  async (t) => {
    if (!chromiumPresent(t)) return;
    // What the test starts is stopped in reverse order when it ends: the browser, the servers, then
    // the directory they used.
    const dir = tempDir(t);

    // The SDK built as `npm run client:build` builds it, into this test's directory (client/dist is the
    // package test's to rebuild); the browser gets exactly what the package ships.
    const sdkDir = join(dir, 'sdk');
    await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'client/tsconfig.json', '--outDir', sdkDir], {
      cwd: ROOT,
    });
    // A browser resolves only relative (or full URL) specifiers: a bare one (`node:crypto`, a
    // package's name) fails the whole module.
    for (const file of readdirSync(sdkDir).filter((f) => f.endsWith('.js'))) {
      const source = readFileSync(join(sdkDir, file), 'utf8');
      const specifiers = [...source.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]/g)].map((m) => m[1]!);
      assert.deepEqual(
        specifiers.filter((s) => !s.startsWith('./') && !s.startsWith('../')),
        [],
        `${file} imports only relative modules`,
      );
    }

    const pages = await startPageServer(sdkDir);
    atEnd(t, () => new Promise((resolve) => pages.server.close(resolve)));
    const secureOrigin = `http://127.0.0.1:${pages.port}`;
    const insecureOrigin = `http://${INSECURE_HOST}:${pages.port}`;
    const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, CORS_ORIGINS: `${secureOrigin},${insecureOrigin}` };
    const key = await keysCreate(env, '--plan', 'pro');
    const api = await startServerProcess(env, { owner: t });

    const browser = await launchChromium([`--host-resolver-rules=MAP ${INSECURE_HOST} 127.0.0.1`]);
    atEnd(t, () => browser.close());

    /** Loads the page from origin and returns its report, with what the browser said on the way. */
    const runPage = async (origin: string, label: string) => {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      page.on('console', (m) => {
        // The browser reports every answer of 400 and above, among them the 404 the page asks for on purpose.
        if (m.type() === 'error' && !/status of 404/.test(m.text())) problems.push(`console: ${m.text()}`);
      });
      await page.goto(`${origin}/#${new URLSearchParams({ api: api.url, key, run: label })}`);
      await page
        .locator('#report[data-done="true"]')
        .waitFor({ timeout: 60_000 })
        .catch((err: Error) => assert.fail(`${origin}: the page wrote no report (${err.message})\n${problems.join('\n')}`));
      const report = JSON.parse(await page.locator('#report').innerText());
      await page.close();
      return { report, problems };
    };

    let pets = 0;
    for (const [origin, secure] of [
      [secureOrigin, true],
      [insecureOrigin, false],
    ] as const) {
      const { report, problems } = await runPage(origin, secure ? 'secure' : 'insecure');
      assert.equal(report.failure, undefined, `${origin}: ${report.failure}\n${problems.join('\n')}`);
      assert.deepEqual(problems, [], origin);
      assert.deepEqual(
        [report.secureContext, report.hasRandomUUID],
        [secure, secure],
        `${origin} is${secure ? '' : ' not'} a secure context`,
      );

      const name = `Browser ${secure ? 'secure' : 'insecure'}`;
      assert.deepEqual(report.first, {
        id: report.first.id,
        name,
        categoryId: '9223372036854775807n',
        status: 'available',
        replayed: false,
      });
      assert.equal(report.generatedKeys.length, 1);
      assert.match(report.generatedKeys[0], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a version 4 UUID');
      assert.equal(report.again.replayed, false);
      assert.deepEqual(report.replay, { ...report.again, replayed: true }, 'Idempotent-Replayed is readable across origins');
      assert.deepEqual(report.got, { id: report.first.id, name, categoryId: '9223372036854775807n', status: 'available' });
      pets += 2;
      assert.equal(report.listed.length, pets, 'every page, one pet each, through the exposed Link header');
      assert.deepEqual(report.listed.slice(-2), [name, 'Keyed']);
      assert.deepEqual([report.error.isPetstoreError, report.error.status, report.error.code], [true, 404, 'not_found']);
      assert.match(report.error.requestId, /^[0-9a-f-]{36}$/);
    }
  },
);
