/**
 * The documentation page: its own Content-Security-Policy and the renderer's configuration, which
 * keeps it on this origin. The renderer is served from assets/ as built: the brotli or gzip copy when
 * the client accepts it, the plain file otherwise, each with its own ETag, under a path that names its
 * version and cached for a year; the pages are limited per address like keyless API requests.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { RENDERER_FILE } from '../../src/http/site/docs.ts';
import { startTestServer, type TestServer } from '../support/servers.ts';
import { request } from '../support/raw-http.ts';

const RENDERER = readFileSync(new URL(`../../assets/${RENDERER_FILE}`, import.meta.url));

/** node:http, not fetch: fetch would ask for and undo content codings itself. */
const rawGet = async (url: string, headers: Record<string, string>) => {
  const { status, headers: answer, bytes } = await request(url, { headers });
  return { status, headers: answer, body: bytes };
};

describe('GET /docs/scalar.standalone.<version>.js', () => {
  let server: TestServer;
  let path: string;
  before(async () => {
    server = await startTestServer({ anonymousPerMinute: 1000 });
    const page = (await request(`${server.url}/docs`, {})).body;
    const src = /<script src="([^"]+)"><\/script>/.exec(page)?.[1];
    assert.match(src ?? '', /^\/docs\/scalar\.standalone\.[A-Za-z0-9_-]{22}\.js$/, 'the page names the renderer by its version');
    path = `${server.url}${src}`;
  });
  after(() => server.close());

  test('sends the brotli copy to a client that accepts br, and it decodes to the renderer', async () => {
    const res = await rawGet(path, { 'accept-encoding': 'gzip, deflate, br, zstd' });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-encoding'], 'br');
    assert.equal(res.headers.vary, 'Accept-Encoding');
    assert.match(res.headers['content-type']!, /^text\/javascript/);
    assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.ok(res.body.length < RENDERER.length / 3, `brotli copy is ${res.body.length} bytes`);
    assert.ok(brotliDecompressSync(res.body).equals(RENDERER));
  });

  test('sends the gzip copy when br is not accepted, or refused with q=0', async () => {
    for (const accept of ['gzip', 'br;q=0, gzip;q=0.5', 'br;q=0, *']) {
      const res = await rawGet(path, { 'accept-encoding': accept });
      assert.equal(res.headers['content-encoding'], 'gzip', accept);
      assert.ok(gunzipSync(res.body).equals(RENDERER), accept);
    }
  });

  test('sends the plain file to a client that accepts no coding', async () => {
    const cases: Record<string, string>[] = [{}, { 'accept-encoding': 'identity' }, { 'accept-encoding': 'gzip;q=0, br;q=0' }];
    for (const headers of cases) {
      const res = await rawGet(path, headers);
      assert.equal(res.headers['content-encoding'], undefined, JSON.stringify(headers));
      assert.ok(res.body.equals(RENDERER), JSON.stringify(headers));
    }
  });

  test('each copy has its own ETag, and a matching If-None-Match is a 304 without a body', async () => {
    const br = await rawGet(path, { 'accept-encoding': 'br' });
    const plain = await rawGet(path, {});
    assert.notEqual(br.headers.etag, plain.headers.etag);
    const again = await rawGet(path, { 'accept-encoding': 'br', 'if-none-match': br.headers.etag! });
    assert.equal(again.status, 304);
    assert.equal(again.body.length, 0);
    const otherCopy = await rawGet(path, { 'if-none-match': br.headers.etag! });
    assert.equal(otherCopy.status, 200, 'the brotli ETag does not validate the plain copy');
  });
});

describe('GET /docs', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ anonymousPerMinute: 1000 });
  });
  after(() => server.close());

  test('the page has its own policy: scripts, the document and requests from this origin only, no eval', async () => {
    const res = await request(`${server.url}/docs`, {});
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type']!, /^text\/html; charset=utf-8/);
    assert.equal(res.headers['cache-control'], 'no-cache', 'the page names the current renderer: revalidated every time');
    const csp = String(res.headers['content-security-policy']);
    const directives = new Map(
      csp
        .split(';')
        .map((d) => d.trim().split(/\s+/))
        .map(([name = '', ...values]) => [name, values]),
    );
    assert.deepEqual(directives.get('default-src'), ["'none'"]);
    assert.deepEqual(directives.get('script-src'), ["'self'"]);
    assert.deepEqual(directives.get('connect-src'), ["'self'"], 'the console sends requests, and the key, to this origin only');
    assert.deepEqual(directives.get('style-src'), ["'self'", "'unsafe-inline'"]);
    assert.deepEqual(directives.get('img-src'), ["'self'", 'data:']);
    for (const name of ['base-uri', 'form-action', 'frame-ancestors']) assert.deepEqual(directives.get(name), ["'none'"], name);
    assert.doesNotMatch(csp, /unsafe-eval|https?:|\*/, 'no eval and no other origin');
    assert.doesNotMatch(
      res.body,
      /<script(?![^>]*\bsrc=)(?![^>]*type="application\/json")/,
      'no inline script: the policy would refuse it',
    );
  });

  test("the renderer's configuration turns off everything that would reach another origin", async () => {
    const res = await request(`${server.url}/docs`, {});
    const attribute = /<script id="api-reference" type="application\/json" data-url="([^"]+)" data-configuration="([^"]+)"><\/script>/.exec(
      res.body,
    );
    assert.ok(attribute, 'the page names the document and the configuration');
    assert.equal(attribute[1], '/v1/openapi.json');
    const configuration = JSON.parse(attribute[2]!.replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&amp;', '&'));
    assert.equal(configuration.withDefaultFonts, false, "no fonts from the vendor's font host");
    assert.equal(configuration.telemetry, false);
    assert.equal(configuration.agent.disabled, true);
    assert.equal(configuration.mcp.disabled, true);
    assert.equal(configuration.showDeveloperTools, 'never');
    assert.equal(configuration.hideClientButton, true, "no button that opens the document in the vendor's hosted client");
    assert.equal(configuration.persistAuth, false, "the reader's key is not written to storage");
    assert.equal(configuration.proxyUrl, undefined, 'no request proxy');
  });
});

test("links to #operation/<operationId> are mapped to the renderer's anchors by a script from this origin", async (t) => {
  const server = await startTestServer({ anonymousPerMinute: 1000 });
  t.after(() => server.close());
  const page = (await request(`${server.url}/docs`, {})).body;
  const tag = /<script src="(\/docs\/anchors\.[A-Za-z0-9_-]{22}\.js)" data-anchors="([^"]+)"><\/script>/.exec(page);
  assert.ok(tag, 'the page loads the anchors script before the renderer');
  assert.ok(page.indexOf(tag[0]) < page.indexOf('scalar.standalone.'), 'before the renderer');
  const anchors = JSON.parse(tag[2]!.replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&amp;', '&'));
  assert.match(anchors.getPet, /^tag\/pets\/GET(\/v1)?\/pets\/\{petId\}$/);
  assert.match(anchors.listPets, /^tag\/pets\/GET(\/v1)?\/pets$/);
  assert.match(anchors.createPet, /^tag\/pets\/POST(\/v1)?\/pets$/);
  const script = await request(`${server.url}${tag[1]}`, {});
  assert.equal(script.status, 200);
  assert.match(script.headers['content-type']!, /^text\/javascript/);
  assert.equal(script.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.match(script.body, /#operation/);
});

test("the renderer's coding is chosen as RFC 9110 weighs Accept-Encoding, and its tag answers If-None-Match", async (t) => {
  const server = await startTestServer();
  t.after(() => server.close());
  const page = await request(`${server.url}/docs`, {});
  const src = /<script src="([^"]+)"><\/script>/.exec(page.body)![1]!;
  const get = (headers: Record<string, string>) => request(`${server.url}${src}`, { headers });
  for (const [accept, coding] of [
    [undefined, undefined],
    ['BR', 'br'],
    ['gzip ; q=0.001', 'gzip'],
    ['gzip;q=0', undefined],
    ['*', 'br'],
    ['*;q=0, gzip', 'gzip'],
    ['br;q=0, *', 'gzip'],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['deflate', undefined],
  ] as const) {
    const res = await get(accept === undefined ? {} : { 'accept-encoding': accept });
    assert.equal(res.status, 200, String(accept));
    assert.equal(res.headers['content-encoding'], coding, String(accept));
    assert.equal(res.headers.vary, 'Accept-Encoding');
    const again = await get({ ...(accept === undefined ? {} : { 'accept-encoding': accept }), 'if-none-match': `W/${res.headers.etag}` });
    assert.equal(again.status, 304, `${accept}: its own tag, weakly compared`);
    assert.equal(again.bytes.length, 0);
  }
  const other = await get({ 'accept-encoding': 'br', 'if-none-match': (await get({})).headers.etag! });
  assert.equal(other.status, 200, "the identity file's tag does not match the br file");
});

test('the documentation is limited per address like keyless API requests', async (t) => {
  const server = await startTestServer({ anonymousPerMinute: 3 });
  t.after(() => server.close());
  const page = await request(`${server.url}/docs`, {});
  assert.equal(page.status, 200);
  assert.equal(page.headers['x-ratelimit-limit'], '3');
  assert.equal(page.headers['x-ratelimit-remaining'], '2');
  const src = /<script src="([^"]+)"><\/script>/.exec(page.body)![1]!;
  assert.equal((await request(`${server.url}${src}`, { headers: { 'accept-encoding': 'br' } })).status, 200);
  // The same bucket as keyless API requests from this address.
  assert.equal((await request(`${server.url}/v1/pets`, {})).status, 401);
  const refused = await request(`${server.url}${src}`, { headers: { 'accept-encoding': 'br' } });
  assert.equal(refused.status, 429);
  assert.equal(JSON.parse(refused.body).code, 'rate_limited');
  assert.ok(Number(refused.headers['retry-after']) >= 1);
  assert.ok(refused.bytes.length < 4096, 'a refusal is small');
});
