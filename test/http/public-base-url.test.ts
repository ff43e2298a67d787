/**
 * The URLs the API sends (the next page's `Link`, a created pet's `Location`, getPet's deprecation
 * `Link`) start with PUBLIC_BASE_URL: paths under /v1 by default, and the public URL, path prefix
 * included, for a deployment behind a proxy that serves the API under a prefix.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { call, startTestServer, type TestServer } from '../support/servers.ts';

/** Adds three pets; answers the Location of the first and the Link of a one-pet page. */
async function urlsOf(server: TestServer): Promise<{ location: string; next: string; deprecation: string; key: string }> {
  const key = await server.key('pro');
  const created = await call(server, 'POST', '/v1/pets', { key, body: { name: 'Biscuit', categoryId: 1 } });
  assert.equal(created.status, 201);
  for (const name of ['Pickle', 'Marmalade']) await call(server, 'POST', '/v1/pets', { key, body: { name, categoryId: 1 } });
  const page = await call(server, 'GET', '/v1/pets?limit=1', { key });
  const got = await call(server, 'GET', `/v1/pets/${created.json.id}`, { key });
  return { location: created.headers.get('location')!, next: page.headers.get('link')!, deprecation: got.headers.get('link')!, key };
}

describe('PUBLIC_BASE_URL', () => {
  test('unset: paths starting with /v1', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const { location, next, deprecation } = await urlsOf(server);
    assert.match(location, /^\/v1\/pets\/[0-9]+$/);
    assert.match(next, /^<\/v1\/pets\?limit=1&cursor=[A-Za-z0-9_-]+>; rel="next"$/);
    assert.equal(deprecation, '</v1/pets>; rel="successor-version", </docs#operation/getPet>; rel="deprecation"');
  });

  test('behind a proxy that serves the API under a prefix: the public URL, prefix included', async (t) => {
    const base = 'https://api.example.com/petstore/v1';
    const server = await startTestServer({ publicBaseUrl: loadConfig({ PUBLIC_BASE_URL: `${base}/` }).publicBaseUrl });
    t.after(() => server.close());
    const { location, next, deprecation, key } = await urlsOf(server);
    assert.match(location, /^https:\/\/api\.example\.com\/petstore\/v1\/pets\/[0-9]+$/);
    assert.equal((await call(server, 'GET', location.slice(base.length - '/v1'.length), { key })).status, 200);
    const link = /^<([^>]+)>; rel="next"$/.exec(next)?.[1] ?? '';
    assert.ok(link?.startsWith(`${base}/pets?limit=1&cursor=`), next);
    // What the proxy forwards for the next page (the prefix taken off) is the next page.
    const second = await call(server, 'GET', link.slice(base.length - '/v1'.length), { key });
    assert.deepEqual(
      second.json.map((p: { name: string }) => p.name),
      ['Pickle'],
    );
    assert.equal(
      deprecation,
      `<${base}/pets>; rel="successor-version", <https://api.example.com/petstore/docs#operation/getPet>; rel="deprecation"`,
    );
  });

  test('a path alone keeps the links relative to the host the client called', async (t) => {
    const server = await startTestServer({ publicBaseUrl: loadConfig({ PUBLIC_BASE_URL: '/petstore/v1' }).publicBaseUrl });
    t.after(() => server.close());
    const { location, next } = await urlsOf(server);
    assert.match(location, /^\/petstore\/v1\/pets\/[0-9]+$/);
    assert.match(next, /^<\/petstore\/v1\/pets\?limit=1&cursor=/);
  });

  test('a value that is not a URL or path ending in /v1 stops the start, naming the variable', () => {
    for (const value of [
      'https://api.example.com/petstore',
      'ftp://api.example.com/v1',
      'https://api.example.com/v1?x=1',
      'v1',
      'https:///v1',
    ]) {
      assert.throws(
        () => loadConfig({ PUBLIC_BASE_URL: value }),
        (err: unknown) => err instanceof ConfigError && /PUBLIC_BASE_URL/.test(err.message),
        value,
      );
    }
  });
});
