/**
 * The answer caches stay within the byte budgets a server is given (PAGE_CACHE_BYTES, PET_CACHE_BYTES),
 * counting every coding they keep, as their gauges on /metrics report; a budget of 0 keeps nothing.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { request } from '../support/raw-http.ts';
import { call, startTestServer, type TestServer } from '../support/servers.ts';

const token = 'metrics-token-0123456789';

/** `petstore_cache_<what>{cache="<cache>"}` as the server reports it. */
async function gauge(server: TestServer, what: 'bytes' | 'entries', cache: string): Promise<number> {
  const text = (await call(server, 'GET', '/metrics', { key: token })).text;
  const line = text.split('\n').find((l) => l.startsWith(`petstore_cache_${what}{cache="${cache}"} `));
  assert.ok(line, `petstore_cache_${what} for ${cache}`);
  return Number(line.split(' ').at(-1));
}

/** 100 control characters, each six bytes of JSON (`\u0001`): a pet of about 660 bytes. */
const controlName = (i: number) => String.fromCharCode(1 + (i % 8)).repeat(100);

async function serverWithPets(t: { after(fn: () => Promise<void>): void }, budgets: { pageCacheBytes: number; petCacheBytes: number }) {
  const server = await startTestServer({ ...budgets, metricsToken: token });
  t.after(() => server.close());
  const key = await server.key('business');
  for (let i = 0; i < 13; i++) await server.store.createPet({ name: controlName(i), categoryId: 1n, status: 'available' });
  return { server, key };
}

/** The first `count` three-pet pages (each about 2 KB, so compressed when asked), every one full. */
async function walkPages(server: TestServer, key: string, count: number, coding = 'identity'): Promise<string[]> {
  const paths: string[] = [];
  let path: string | undefined = '/v1/pets?limit=3';
  for (let i = 0; i < count && path; i++) {
    const answer = await request(server.url + path, { headers: { authorization: `Bearer ${key}`, 'accept-encoding': coding } });
    assert.equal(answer.status, 200);
    assert.ok(answer.headers.link, 'a full page');
    paths.push(path);
    path = /<\/v1([^>]+)>; rel="next"/.exec(String(answer.headers.link))?.[1];
    path &&= `/v1${path}`;
  }
  return paths;
}

describe('cache budgets', () => {
  test('full pages are kept within PAGE_CACHE_BYTES, each coding counted, least recently used first out', async (t) => {
    const pageCacheBytes = 8_000; // two or three 2 KB pages with their overhead
    const { server, key } = await serverWithPets(t, { pageCacheBytes, petCacheBytes: 0 });
    const [first] = await walkPages(server, key, 1);
    const onePage = await gauge(server, 'bytes', 'pages');
    assert.ok(onePage > 2_000, `a page of 2 KB counted whole: ${onePage}`);
    const headers = { authorization: `Bearer ${key}`, 'accept-encoding': 'gzip' };
    assert.equal((await request(server.url + first!, { headers })).headers['content-encoding'], 'gzip');
    const withGzip = await gauge(server, 'bytes', 'pages');
    assert.ok(withGzip > onePage, `the gzip form is counted: ${onePage} then ${withGzip}`);

    for (const coding of ['identity', 'gzip', 'br']) await walkPages(server, key, 4, coding);
    const bytes = await gauge(server, 'bytes', 'pages');
    const entries = await gauge(server, 'entries', 'pages');
    assert.ok(bytes <= pageCacheBytes, `${bytes} bytes held`);
    assert.ok(entries >= 1 && entries < 4, `${entries} of the 4 pages held`);
  });

  test('found pets are kept within PET_CACHE_BYTES', async (t) => {
    const petCacheBytes = 3_000; // two pets of about 660 bytes with their overhead
    const { server, key } = await serverWithPets(t, { pageCacheBytes: 0, petCacheBytes });
    for (let id = 1; id <= 5; id++) assert.equal((await call(server, 'GET', `/v1/pets/${id}`, { key })).status, 200);
    const bytes = await gauge(server, 'bytes', 'pets');
    const entries = await gauge(server, 'entries', 'pets');
    assert.ok(bytes > 0 && bytes <= petCacheBytes, `${bytes} bytes held`);
    assert.ok(entries >= 1 && entries < 5, `${entries} of the 5 pets held`);
  });

  test('budgets of 0 keep nothing, and answers stay the same', async (t) => {
    const { server, key } = await serverWithPets(t, { pageCacheBytes: 0, petCacheBytes: 0 });
    const [first] = await walkPages(server, key, 2);
    const again = await call(server, 'GET', first!, { key });
    assert.equal(again.json.length, 3);
    assert.equal(again.json[0].name, controlName(0));
    assert.equal((await call(server, 'GET', '/v1/pets/1', { key })).json.name, controlName(0));
    assert.equal(await gauge(server, 'bytes', 'pages'), 0);
    assert.equal(await gauge(server, 'entries', 'pages'), 0);
    assert.equal(await gauge(server, 'bytes', 'pets'), 0);
  });
});
