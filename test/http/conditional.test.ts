/**
 * Conditional requests: list pages and pets carry a strong ETag, and `If-None-Match` naming it gets
 * `304 Not Modified` without a body, with the headers the 200 would carry, charged like any request.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { noneMatchHits } from '../../src/http/answers/conditional.ts';
import { call, startTestServer, type TestServer } from '../support/servers.ts';
import { request } from '../support/raw-http.ts';

const TAG = /^"[A-Za-z0-9_-]{22}"$/;

/** What a 304 must keep of its 200 (RFC 9110 §15.4.5), besides the headers of every answer under /v1. */
const KEPT = ['etag', 'cache-control', 'vary', 'link', 'deprecation', 'sunset'];
const EVERY_ANSWER = ['x-request-id', 'x-ratelimit-limit', 'x-ratelimit-reset', 'ratelimit-policy'];

describe('conditional requests', () => {
  let server: TestServer;
  let key: string;
  // Uncompressed unless a test says otherwise: fetch asks for gzip by itself (compression: http/compression.test.ts).
  const get = (path: string, headers: Record<string, string> = {}) =>
    call(server, 'GET', path, { key, headers: { 'accept-encoding': 'identity', ...headers } });
  before(async () => {
    server = await startTestServer();
    key = await server.key('business');
    // 25 pets: a full first page of 20 (about 1.3 KB, so it is also compressible) and a last page of 5.
    for (let i = 1; i <= 25; i++) await server.store.createPet({ name: `Pet number ${i}`, categoryId: BigInt(i), status: 'available' });
  });
  after(() => server.close());

  test('list pages and pets carry a strong ETag that stays the same while the answer does', async () => {
    for (const path of ['/v1/pets', '/v1/pets?limit=5', '/v1/pets/3']) {
      const [first, second] = [await get(path), await get(path)];
      assert.equal(first.status, 200, path);
      assert.match(first.headers.get('etag')!, TAG, path);
      assert.equal(second.headers.get('etag'), first.headers.get('etag'), path);
    }
    assert.notEqual((await get('/v1/pets/3')).headers.get('etag'), (await get('/v1/pets/4')).headers.get('etag'));
    // One pet, one tag, however its id is written.
    assert.equal((await get('/v1/pets/003')).headers.get('etag'), (await get('/v1/pets/3')).headers.get('etag'));
  });

  test("a matching If-None-Match gets 304 without a body, with the 200's headers, and is charged", async () => {
    for (const path of ['/v1/pets', '/v1/pets?limit=10', '/v1/pets/7']) {
      const full = await get(path);
      const etag = full.headers.get('etag')!;
      const again = await get(path, { 'if-none-match': etag });
      assert.equal(again.status, 304, path);
      assert.equal(again.text, '', path);
      assert.equal(again.headers.get('content-type'), null, `${path}: no representation metadata without a body`);
      assert.equal(again.headers.get('content-length'), null, path);
      for (const name of KEPT) assert.equal(again.headers.get(name), full.headers.get(name), `${path}: ${name}`);
      for (const name of EVERY_ANSWER) assert.ok(again.headers.get(name), `${path}: ${name}`);
      assert.notEqual(again.headers.get('x-request-id'), full.headers.get('x-request-id'));
      assert.equal(Number(again.headers.get('x-ratelimit-remaining')), Number(full.headers.get('x-ratelimit-remaining')) - 1, path);
    }
    // What the 304 keeps is there to be kept: the next link, Vary, and getPet's deprecation fields.
    const page = await get('/v1/pets', { 'if-none-match': (await get('/v1/pets')).headers.get('etag')! });
    assert.match(page.headers.get('link')!, /rel="next"/);
    assert.match(page.headers.get('vary')!, /Accept-Encoding/);
    assert.equal(page.headers.get('cache-control'), 'no-store');
    const pet = await get('/v1/pets/7', { 'if-none-match': (await get('/v1/pets/7')).headers.get('etag')! });
    assert.equal(pet.headers.get('deprecation'), '@1793491200');
    assert.match(pet.headers.get('link')!, /rel="successor-version"/);
  });

  test('If-None-Match is answered whatever Cache-Control and If-Modified-Since say beside it', async () => {
    // A cache's rules (no-cache: revalidate) are not the origin's; If-Modified-Since yields to If-None-Match.
    const etag = (await get('/v1/pets/7')).headers.get('etag')!;
    const since = 'Thu, 01 Jan 2026 00:00:00 GMT';
    const again = await get('/v1/pets/7', { 'if-none-match': etag, 'cache-control': 'no-cache', 'if-modified-since': since });
    assert.equal(again.status, 304);
  });

  test('If-None-Match lists, weak tags and * match; other tags do not', async () => {
    const etag = (await get('/v1/pets/2')).headers.get('etag')!;
    for (const field of [etag, `"other", ${etag}`, `W/${etag}`, `"a,b",W/${etag}`, ` ${etag} `, '*', `"x",\t${etag}, "y"`]) {
      assert.equal((await get('/v1/pets/2', { 'if-none-match': field })).status, 304, field);
    }
    for (const field of ['"other"', `W/"other", "more"`, etag.slice(1, -1), `${etag.slice(0, -2)}"`, `"${etag}"`, `W/${etag.slice(1)}`]) {
      assert.equal((await get('/v1/pets/2', { 'if-none-match': field })).status, 200, field);
    }
    // An error is never turned into a 304.
    assert.equal((await get('/v1/pets/424242', { 'if-none-match': '*' })).status, 404);
  });

  test('the last page gets a new ETag when its body changes; full pages keep theirs', async () => {
    const first = await get('/v1/pets?limit=20');
    const lastPath = /<\/v1([^>]+)>; rel="next"/.exec(first.headers.get('link')!)![1]!;
    const last = await get(`/v1${lastPath}`);
    assert.equal(last.json.length, 5);
    await server.store.createPet({ name: 'Latecomer', categoryId: 1n, status: 'pending' });
    const grown = await get(`/v1${lastPath}`, { 'if-none-match': last.headers.get('etag')! });
    assert.equal(grown.status, 200, 'the old tag no longer names the page');
    assert.equal(grown.json.length, 6);
    assert.notEqual(grown.headers.get('etag'), last.headers.get('etag'));
    assert.equal((await get('/v1/pets?limit=20')).headers.get('etag'), first.headers.get('etag'));
  });

  test('a page whose body stays the same but gains a next link gets a new ETag', async () => {
    const all = (await get('/v1/pets?limit=100')).json.length;
    const alone = await get(`/v1/pets?limit=${all}`);
    assert.equal(alone.headers.get('link'), null);
    await server.store.createPet({ name: 'One more', categoryId: 1n, status: 'sold' });
    const followed = await get(`/v1/pets?limit=${all}`, { 'if-none-match': alone.headers.get('etag')! });
    assert.equal(followed.status, 200);
    assert.equal(followed.text, alone.text);
    assert.match(followed.headers.get('link')!, /rel="next"/);
    assert.notEqual(followed.headers.get('etag'), alone.headers.get('etag'));
  });

  test("HEAD answers with the GET's status and headers, 304 included", async () => {
    const auth = { authorization: `Bearer ${key}` };
    for (const path of ['/v1/pets', '/v1/pets/5']) {
      const got = await request(server.url + path, { headers: auth });
      const head = await request(server.url + path, { method: 'HEAD', headers: auth });
      assert.equal(head.status, 200);
      assert.equal(head.bytes.length, 0);
      for (const name of ['etag', 'content-length', 'content-type', 'vary', 'link'])
        assert.equal(head.headers[name], got.headers[name], `${path} ${name}`);
      const notModified = await request(server.url + path, { method: 'HEAD', headers: { ...auth, 'if-none-match': got.headers.etag! } });
      assert.equal(notModified.status, 304);
      assert.equal(notModified.headers.etag, got.headers.etag);
    }
  });

  test('a pet is read from storage once; an id not found is looked up again, so a pet created later is found', async () => {
    const reads: bigint[] = [];
    const getPet = server.store.getPet;
    server.store.getPet = (id) => {
      reads.push(id);
      return getPet.call(server.store, id);
    };
    try {
      for (let i = 0; i < 3; i++) assert.equal((await get('/v1/pets/11')).status, 200);
      assert.equal((await get('/v1/pets/0011')).status, 200);
      assert.deepEqual(reads, [11n], 'read once, then served from memory');

      const next = (await get('/v1/pets?limit=100')).json.at(-1).id + 1;
      assert.equal((await get(`/v1/pets/${next}`)).status, 404);
      const created = await call(server, 'POST', '/v1/pets', { key, body: { name: 'Newcomer', categoryId: 2 } });
      assert.equal(created.json.id, next);
      const found = await get(`/v1/pets/${next}`);
      assert.equal(found.status, 200);
      assert.deepEqual(found.json, created.json);
    } finally {
      server.store.getPet = getPet;
    }
  });
});

test('If-None-Match is compared the weak way, element by element', () => {
  const tag = '"abc"';
  assert.equal(noneMatchHits(undefined, tag), false);
  assert.equal(noneMatchHits('', tag), false);
  assert.equal(noneMatchHits('"abc"', tag), true);
  assert.equal(noneMatchHits('W/"abc"', tag), true);
  assert.equal(noneMatchHits('*', tag), true);
  assert.equal(noneMatchHits(' "x" ,W/"abc"', tag), true);
  assert.equal(noneMatchHits('"a,"abc"', tag), false, 'a comma inside a quoted tag belongs to it');
  assert.equal(noneMatchHits('"a,", "abc"', tag), true);
  assert.equal(noneMatchHits('abc, "abd"', tag), false);
  assert.equal(noneMatchHits('junk, "abc"', tag), true);
  assert.equal(noneMatchHits('"abc', tag), false);
  assert.equal(noneMatchHits('w/"abc"', tag), false, 'the weak prefix is case-sensitive');
});
