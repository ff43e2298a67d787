/**
 * Compressed answers: list pages of 1 KiB and more come in br or gzip when `Accept-Encoding` asks,
 * read by its weights, with `Vary: Accept-Encoding` and a tag of their own; smaller bodies and errors
 * come as they are.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { chooseCoding } from '../../src/http/answers/compression.ts';
import { request, type HttpResult } from '../support/raw-http.ts';
import { startTestServer, type TestServer } from '../support/servers.ts';

describe('compression', () => {
  let server: TestServer;
  let key: string;
  /** node:http, which leaves the body as it came: fetch would decompress it. */
  const get = (path: string, headers: Record<string, string> = {}, method = 'GET') =>
    request(server.url + path, { method, headers: { authorization: `Bearer ${key}`, ...headers } });
  const decoded = (res: HttpResult): Buffer => {
    const coding = res.headers['content-encoding'];
    if (coding === 'br') return brotliDecompressSync(res.bytes);
    if (coding === 'gzip') return gunzipSync(res.bytes);
    assert.equal(coding, undefined);
    return res.bytes;
  };
  before(async () => {
    server = await startTestServer();
    key = await server.key('business');
    for (let i = 1; i <= 120; i++) await server.store.createPet({ name: `Pet number ${i}`, categoryId: BigInt(i), status: 'available' });
  });
  after(() => server.close());

  test('br and gzip bodies decompress to exactly the identity body, each with a tag of its own', async () => {
    // The first page (about 1.3 KB), a 100-pet page, and the last page (20 pets), read fresh each time.
    const last = /<\/v1([^>]+)>; rel="next"/.exec(String((await get('/v1/pets?limit=100')).headers.link))![1]!;
    for (const path of ['/v1/pets', '/v1/pets?limit=100', `/v1${last}`]) {
      const plain = await get(path);
      assert.ok(plain.bytes.length >= 1024, `${path}: ${plain.bytes.length} bytes`);
      assert.equal(plain.headers['content-encoding'], undefined);
      assert.equal(plain.headers.vary, 'Accept-Encoding');
      for (const [coding, suffix] of [
        ['br', '-br'],
        ['gzip', '-gzip'],
      ] as const) {
        for (let i = 0; i < 2; i++) {
          // Twice: the second answer of a full page comes from the compressed copy the cache kept.
          const res = await get(path, { 'accept-encoding': coding });
          assert.equal(res.status, 200);
          assert.equal(res.headers['content-encoding'], coding, path);
          assert.equal(res.headers['content-type'], plain.headers['content-type']);
          assert.equal(res.headers.vary, 'Accept-Encoding');
          assert.equal(res.headers.etag, `${plain.headers.etag!.slice(0, -1)}${suffix}"`);
          assert.equal(Number(res.headers['content-length']), res.bytes.length);
          assert.ok(res.bytes.length < plain.bytes.length / 2, `${path} ${coding}: ${res.bytes.length} of ${plain.bytes.length} bytes`);
          assert.deepEqual(decoded(res), plain.bytes, `${path} ${coding}`);
          assert.equal(res.headers.link, plain.headers.link);
        }
      }
    }
  });

  test('a last page compressed for an earlier reader is compressed again once it changes', async () => {
    const last = /<\/v1([^>]+)>; rel="next"/.exec(String((await get('/v1/pets?limit=100')).headers.link))![1]!;
    const before = await get(`/v1${last}`, { 'accept-encoding': 'br' });
    await server.store.createPet({ name: 'Latecomer with a name long enough to tell', categoryId: 1n, status: 'sold' });
    const plain = await get(`/v1${last}`);
    for (const coding of ['br', 'gzip']) {
      const after = await get(`/v1${last}`, { 'accept-encoding': coding });
      assert.deepEqual(decoded(after), plain.bytes, coding);
      assert.equal(after.headers.etag, `${plain.headers.etag!.slice(0, -1)}-${coding}"`);
    }
    assert.notEqual(plain.headers.etag, before.headers.etag!.replace('-br"', '"'));
  });

  test('Accept-Encoding is read by its weights: q=0 refuses, * stands for the rest, br first at equal weight', async () => {
    const cases: [string | undefined, string | undefined][] = [
      [undefined, undefined],
      ['', undefined],
      ['gzip, br', 'br'],
      ['br;q=0.5, gzip', 'gzip'],
      ['br;q=0, gzip;q=0', undefined],
      ['gzip;q=0', undefined],
      ['*', 'br'],
      ['*;q=0', undefined],
      ['br;q=0, *', 'gzip'],
      ['identity', undefined],
      ['gzip;q=0.8, identity;q=0.9', undefined],
      ['GZIP', 'gzip'],
      ['x-gzip', 'gzip'],
      ['deflate', undefined],
      ['gzip, deflate', 'gzip'],
      // A weight outside the qvalue grammar is read as its number, not dropped (negotiator's reading).
      ['br;q=1.5, gzip;q=0.2', 'br'],
      ['br ; Q=0.9 , gzip;q=0.8', 'br'],
    ];
    for (const [accept, coding] of cases) {
      const res = await get('/v1/pets', accept === undefined ? {} : { 'accept-encoding': accept });
      assert.equal(res.headers['content-encoding'], coding, `Accept-Encoding: ${accept}`);
      assert.equal(res.headers.vary, 'Accept-Encoding', `Accept-Encoding: ${accept}`);
      assert.equal(JSON.parse(decoded(res).toString()).length, 20);
    }
  });

  test('bodies under 1 KiB and errors come as they are, without Vary', async () => {
    const answers = [
      await get('/v1/pets?limit=3', { 'accept-encoding': 'br, gzip' }),
      await get('/v1/pets/1', { 'accept-encoding': 'br' }),
    ];
    // A 400 whose details make it longer than the threshold.
    const fields = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`unexpected_field_with_a_long_name_${i}`, i]));
    const error = await request(`${server.url}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'accept-encoding': 'br, gzip' },
      body: JSON.stringify({ name: 'x', categoryId: 1, ...fields }),
    });
    assert.equal(error.status, 400);
    assert.ok(error.bytes.length >= 1024, `${error.bytes.length} bytes`);
    for (const res of [...answers, error]) {
      assert.equal(res.headers['content-encoding'], undefined);
      assert.equal(res.headers.vary, undefined);
      JSON.parse(res.body);
    }
  });

  test("If-None-Match names a compressed answer by its own tag, and HEAD carries GET's coding and length", async () => {
    const br = await get('/v1/pets', { 'accept-encoding': 'br' });
    const again = await get('/v1/pets', { 'accept-encoding': 'br', 'if-none-match': br.headers.etag! });
    assert.equal(again.status, 304);
    assert.equal(again.bytes.length, 0);
    assert.equal(again.headers.etag, br.headers.etag);
    assert.equal(again.headers.vary, 'Accept-Encoding');
    // The br tag does not name the gzip or the identity representation, nor the reverse.
    const gzip = await get('/v1/pets', { 'accept-encoding': 'gzip', 'if-none-match': br.headers.etag! });
    assert.equal(gzip.status, 200);
    assert.equal(gzip.headers['content-encoding'], 'gzip');
    const identityTag = br.headers.etag!.replace('-br"', '"');
    assert.equal((await get('/v1/pets', { 'accept-encoding': 'br', 'if-none-match': identityTag })).status, 200);
    assert.equal((await get('/v1/pets', { 'if-none-match': identityTag })).status, 304);

    for (const coding of ['br', 'gzip']) {
      const got = await get('/v1/pets?limit=50', { 'accept-encoding': coding });
      const head = await get('/v1/pets?limit=50', { 'accept-encoding': coding }, 'HEAD');
      assert.equal(head.status, 200);
      assert.equal(head.bytes.length, 0);
      for (const name of ['content-encoding', 'content-length', 'content-type', 'etag', 'vary', 'link']) {
        assert.equal(head.headers[name], got.headers[name], `${coding} ${name}`);
      }
    }
  });

  test('With CORS on, Vary names Origin and Accept-Encoding', async () => {
    const cors = await startTestServer({ corsOrigins: ['https://app.example'] });
    try {
      const corsKey = await cors.key('business');
      for (let i = 1; i <= 25; i++) await cors.store.createPet({ name: `Pet number ${i}`, categoryId: 1n, status: 'available' });
      const res = await request(`${cors.url}/v1/pets`, {
        headers: { authorization: `Bearer ${corsKey}`, origin: 'https://app.example', 'accept-encoding': 'gzip' },
      });
      assert.equal(res.headers['content-encoding'], 'gzip');
      assert.equal(res.headers.vary, 'Origin, Accept-Encoding');
      assert.match(res.headers['access-control-expose-headers']!, /\bETag\b/);
    } finally {
      await cors.close();
    }
  });
});

test('chooseCoding picks the acceptable coding of highest weight', () => {
  assert.equal(chooseCoding(undefined), 'identity');
  assert.equal(chooseCoding('br, gzip'), 'br');
  assert.equal(chooseCoding('gzip;q=1, br;q=1.0'), 'br');
  assert.equal(chooseCoding('gzip;q=0.5'), 'gzip', 'identity, not named, comes last');
  assert.equal(chooseCoding('gzip;q=0.5, identity'), 'identity');
  assert.equal(chooseCoding('identity;q=0'), 'identity', 'nothing else offered is acceptable: sent as it is');
  assert.equal(chooseCoding('*;q=0.3, gzip;q=0.2'), 'br');
  assert.equal(chooseCoding('br;q=0.0001'), 'br', 'four decimals are no qvalue, but read as the weight they say');
  assert.equal(chooseCoding('br;q=0.001'), 'br');
  assert.equal(chooseCoding('br;q=0, br'), 'br', 'named twice: the higher weight');
  assert.equal(chooseCoding(',,gzip , ,'), 'gzip');
  assert.equal(chooseCoding('gzip;level=1'), 'gzip');
});
