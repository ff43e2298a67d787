/** getPet is deprecated: headers on every one of its answers, and 410 from the sunset moment on. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { GET_PET_SUNSET_AT_MS } from '../../src/domain/deprecation.ts';
import { call, errorOf, startTestServer, type TestServer } from '../support/servers.ts';

function assertDeprecationHeaders(headers: Headers): void {
  assert.equal(headers.get('deprecation'), '@1793491200');
  assert.equal(headers.get('sunset'), 'Thu, 05 Dec 2030 00:00:00 GMT');
  assert.equal(headers.get('link'), '</v1/pets>; rel="successor-version", </docs#operation/getPet>; rel="deprecation"');
}

describe('deprecation of getPet', () => {
  let server: TestServer;
  let key: string;
  before(async () => {
    server = await startTestServer();
    key = await server.key('pro');
  });
  after(() => server.close());

  test('every answer of getPet carries Deprecation, Sunset and Link: 200, 404, 400 and 401', async () => {
    const created = await call(server, 'POST', '/v1/pets', { key, body: { name: 'a', categoryId: 1 } });
    const answers = [
      await call(server, 'GET', `/v1/pets/${created.json.id}`, { key }),
      await call(server, 'GET', '/v1/pets/424242', { key }),
      await call(server, 'GET', '/v1/pets/abc', { key }),
      await call(server, 'GET', '/v1/pets/1'),
    ];
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 404, 400, 401],
    );
    for (const res of answers) assertDeprecationHeaders(res.headers);
  });

  test('the other operations carry no deprecation headers', async () => {
    const res = await call(server, 'GET', '/v1/pets', { key });
    assert.equal(res.headers.get('deprecation'), null);
    assert.equal(res.headers.get('sunset'), null);
  });

  test('one millisecond before the sunset it still answers; from the sunset moment on it is 410 gone', async () => {
    const created = await call(server, 'POST', '/v1/pets', { key, body: { name: 'b', categoryId: 1 } });
    server.clock.ms = GET_PET_SUNSET_AT_MS - 1;
    assert.equal((await call(server, 'GET', `/v1/pets/${created.json.id}`, { key })).status, 200);
    server.clock.ms = GET_PET_SUNSET_AT_MS;
    const gone = await call(server, 'GET', `/v1/pets/${created.json.id}`, { key });
    errorOf(gone, 410, 'gone');
    assertDeprecationHeaders(gone.headers);
    assert.ok(gone.headers.get('x-ratelimit-limit'));
    server.clock.ms = GET_PET_SUNSET_AT_MS + 86_400_000 * 365;
    errorOf(await call(server, 'GET', '/v1/pets/abc', { key }), 410, 'gone');
    // listPets, the replacement, still works after the sunset.
    assert.equal((await call(server, 'GET', '/v1/pets?status=available', { key })).status, 200);
  });
});
