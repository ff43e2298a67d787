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
