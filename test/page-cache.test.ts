/** The full-page cache keeps the most recently used pages up to its capacity, each for its lifetime. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PageCache } from '../src/http/page-cache.ts';

const page = (n: number) => ({ body: `[${n}]`, link: `<${n}>`, etag: `"${n}"`, encoded: {} });
const fields = (p: { body: string; link: string; etag: string; encoded: object } | undefined) =>
  p && { body: p.body, link: p.link, etag: p.etag, encoded: p.encoded };

test('evicts the least recently used page beyond its capacity', () => {
  const cache = new PageCache(2, Infinity, () => 0);
  cache.set('a', page(1));
  cache.set('b', page(2));
  assert.deepEqual(fields(cache.get('a')), page(1)); // a is now the most recent
  cache.set('c', page(3));
  assert.equal(cache.get('b'), undefined);
  assert.deepEqual(fields(cache.get('a')), page(1));
  assert.deepEqual(fields(cache.get('c')), page(3));
});

test('a capacity of 0, or a lifetime of 0, keeps nothing', () => {
  for (const cache of [new PageCache(0, Infinity, () => 0), new PageCache(10, 0, () => 0)]) {
    cache.set('a', page(1));
    assert.equal(cache.get('a'), undefined);
  }
});

test('a page is served for its lifetime after it was read, then read again', () => {
  let now = 1_000;
  const cache = new PageCache(10, 1000, () => now);
  cache.set('a', page(1));
  now += 999;
  assert.deepEqual(fields(cache.get('a')), page(1));
  now += 1;
  assert.equal(cache.get('a'), undefined, 'expired');
  assert.equal(cache.get('a'), undefined, 'and gone');
});

test('expired pages no one asks for again are dropped as new ones are kept, not held until the cache is full', () => {
  let now = 1_000;
  const cache = new PageCache(1000, 1000, () => now);
  for (let i = 0; i < 100; i++) cache.set(`old ${i}`, page(i));
  now = 1_400;
  cache.set('recent', page(100));
  now = 1_500;
  assert.deepEqual(fields(cache.get('old 0')), page(0)); // used again: now the most recently used
  now = 2_000; // the old pages have expired, 'recent' has not
  cache.set('new', page(101));
  assert.equal(cache.size, 3, "old 1 to 99 are gone; 'recent', 'old 0' (behind it) and 'new' are held");
  now = 2_400; // 'recent' and 'old 0' have expired too
  cache.set('newer', page(102));
  assert.equal(cache.size, 2);
  assert.deepEqual(fields(cache.get('new')), page(101));
  assert.deepEqual(fields(cache.get('newer')), page(102));
});

test('where pages are final the lifetime is unbounded', () => {
  let now = 0;
  const cache = new PageCache(10, Infinity, () => now);
  cache.set('a', page(1));
  now = Number.MAX_SAFE_INTEGER;
  assert.deepEqual(fields(cache.get('a')), page(1));
});

test('a hit shares the compressed forms of the page, so each is made once', () => {
  const cache = new PageCache(10, Infinity, () => 0);
  const original = page(1);
  cache.set('a', original);
  const compressed = Buffer.from('br bytes');
  cache.get('a')!.encoded.br = compressed;
  assert.equal(cache.get('a')!.encoded.br, compressed);
});
