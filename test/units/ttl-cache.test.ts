/**
 * The TTL cache behind the API key and ban lookups (src/domain/ttl-cache.ts), driven by the time each
 * call is given: an entry is read until exactly its TTL has passed, a full cache is emptied rather than
 * growing, a key set again in a full cache does not empty it, and a deleted entry is gone. No I/O.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { TtlCache } from '../../src/domain/ttl-cache.ts';

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const TTL = 30_000;

/** The keys of `keys` that the cache still answers for at `nowMs`. */
const readable = (cache: TtlCache<string, number>, keys: readonly string[], nowMs: number) =>
  keys.filter((key) => cache.get(key, nowMs) !== undefined);

describe('TtlCache: expiry', () => {
  test('an entry is read back as set until its TTL has passed, and not from the moment it has', () => {
    const cache = new TtlCache<string, { plan: string }>({ ttlMs: TTL });
    const value = { plan: 'free' };
    cache.set('k', value, T0);
    assert.equal(cache.get('k', T0), value);
    assert.equal(cache.get('k', T0 + TTL - 1), value);
    assert.equal(cache.get('k', T0 + TTL), undefined);
    assert.equal(cache.get('k', T0 + TTL + 1), undefined);
  });

  test('a key never set is not there', () => {
    const cache = new TtlCache<string, number>({ ttlMs: TTL });
    cache.set('k', 1, T0);
    assert.equal(cache.get('other', T0), undefined);
  });

  test('setting a key again replaces its value and counts its TTL from the new time', () => {
    const cache = new TtlCache<string, number>({ ttlMs: TTL });
    cache.set('k', 1, T0);
    cache.set('k', 2, T0 + TTL / 2);
    assert.equal(cache.get('k', T0 + TTL), 2);
    assert.equal(cache.get('k', T0 + TTL + TTL / 2 - 1), 2);
    assert.equal(cache.get('k', T0 + TTL + TTL / 2), undefined);
  });

  test('a falsy value (0: a key not banned) is cached like any other', () => {
    const cache = new TtlCache<string, number>({ ttlMs: TTL });
    cache.set('k', 0, T0);
    assert.equal(cache.get('k', T0 + 1), 0);
  });
});

describe('TtlCache: delete', () => {
  test('a deleted entry is gone at once, and the others stay', () => {
    const cache = new TtlCache<string, number>({ ttlMs: TTL });
    cache.set('a', 1, T0);
    cache.set('b', 2, T0);
    cache.delete('a');
    assert.equal(cache.get('a', T0), undefined);
    assert.equal(cache.get('b', T0), 2);
  });

  test('deleting a key that is not there changes nothing', () => {
    const cache = new TtlCache<string, number>({ ttlMs: TTL });
    cache.set('a', 1, T0);
    cache.delete('b');
    assert.equal(cache.get('a', T0), 1);
  });
});

describe('TtlCache: size bound', () => {
  test('up to maxEntries keys are kept side by side', () => {
    const cache = new TtlCache<string, number>({ ttlMs: TTL, maxEntries: 3 });
    cache.set('a', 1, T0);
    cache.set('b', 2, T0);
    cache.set('c', 3, T0);
    assert.deepEqual(readable(cache, ['a', 'b', 'c'], T0), ['a', 'b', 'c']);
  });

  test('a new key in a full cache empties it first: only the new key is left', () => {
    const cache = new TtlCache<string, number>({ ttlMs: TTL, maxEntries: 3 });
    for (const key of ['a', 'b', 'c']) cache.set(key, 1, T0);
    cache.set('d', 4, T0);
    assert.deepEqual(readable(cache, ['a', 'b', 'c', 'd'], T0), ['d']);
  });

  test('a key set again in a full cache keeps the others', () => {
    const cache = new TtlCache<string, number>({ ttlMs: TTL, maxEntries: 3 });
    for (const key of ['a', 'b', 'c']) cache.set(key, 1, T0);
    cache.set('b', 2, T0 + 1);
    assert.deepEqual(readable(cache, ['a', 'b', 'c'], T0 + 1), ['a', 'b', 'c']);
    assert.equal(cache.get('b', T0 + 1), 2);
  });

  test('without maxEntries the bound is 10,000 keys', () => {
    const cache = new TtlCache<number, number>({ ttlMs: TTL });
    for (let key = 0; key < 10_000; key++) cache.set(key, key, T0);
    assert.equal(cache.get(0, T0), 0);
    assert.equal(cache.get(9_999, T0), 9_999);
    cache.set(10_000, 10_000, T0);
    assert.equal(cache.get(0, T0), undefined);
    assert.equal(cache.get(9_999, T0), undefined);
    assert.equal(cache.get(10_000, T0), 10_000);
  });

  test('whatever the keys set, no more than maxEntries are ever readable, and the last one set always is', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 40 }), (maxEntries, keys) => {
        const cache = new TtlCache<number, number>({ ttlMs: TTL, maxEntries });
        const all = Array.from({ length: 10 }, (_, key) => key);
        keys.forEach((key, i) => {
          cache.set(key, i, T0);
          assert.equal(cache.get(key, T0), i);
          assert.ok(all.filter((k) => cache.get(k, T0) !== undefined).length <= maxEntries);
        });
      }),
    );
  });
});
