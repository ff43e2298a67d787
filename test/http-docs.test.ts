/**
 * The documentation page's renderer is served from assets/ as built: the brotli or gzip copy when the
 * client accepts it, the plain file otherwise, each with its own ETag, under a path that names its
 * version and cached for a year; the pages are limited per address like keyless API requests.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { acceptsCoding } from '../src/http/routes/docs.ts';
import { startTestServer, type TestServer } from './support/servers.ts';
import { request } from './support/raw-http.ts';

const RENDERER = readFileSync(new URL('../assets/redoc.standalone.js', import.meta.url));

/** node:http, not fetch: fetch would ask for and undo content codings itself. */
const rawGet = async (url: string, headers: Record<string, string>) => {
  const { status, headers: answer, bytes } = await request(url, { headers });
  return { status, headers: answer, body: bytes };
};

describe('GET /docs/redoc.standalone.<version>.js', () => {
  let server: TestServer;
  let path: string;
  before(async () => {
    server = await startTestServer({ anonymousPerMinute: 1000 });
    const page = (await request(`${server.url}/docs`, {})).body;
    const src = /<script src="([^"]+)"><\/script>/.exec(page)?.[1];
    assert.match(src ?? '', /^\/docs\/redoc\.standalone\.[A-Za-z0-9_-]{22}\.js$/, 'the page names the renderer by its version');
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

test('Accept-Encoding is read as RFC 9110 says: names, q-values, the wildcard, any case', () => {
  assert.equal(acceptsCoding(undefined, 'br'), false);
  assert.equal(acceptsCoding('BR', 'br'), true);
  assert.equal(acceptsCoding('gzip ; q=0.001', 'gzip'), true);
  assert.equal(acceptsCoding('gzip;q=0', 'gzip'), false);
  assert.equal(acceptsCoding('*', 'br'), true);
  assert.equal(acceptsCoding('*;q=0, gzip', 'br'), false);
  assert.equal(acceptsCoding('br;q=0, *', 'br'), false);
  assert.equal(acceptsCoding('deflate', 'gzip'), false);
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
