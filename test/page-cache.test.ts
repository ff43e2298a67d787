/** The finished-page cache keeps the most recently used pages up to its capacity. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PageCache } from '../src/http/page-cache.js';

const page = (n: number) => ({ body: `[${n}]`, link: `<${n}>` });

test('evicts the least recently used page beyond its capacity', () => {
  const cache = new PageCache(2);
  cache.set('a', page(1));
  cache.set('b', page(2));
  assert.deepEqual(cache.get('a'), page(1)); // a is now the most recent
  cache.set('c', page(3));
  assert.equal(cache.get('b'), undefined);
  assert.deepEqual(cache.get('a'), page(1));
  assert.deepEqual(cache.get('c'), page(3));
});

test('a capacity of 0 keeps nothing', () => {
  const cache = new PageCache(0);
  cache.set('a', page(1));
  assert.equal(cache.get('a'), undefined);
});
