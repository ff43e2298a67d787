/** The answer caches keep the most recently used entries within their byte budgets, each for its lifetime. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compress } from '../../src/http/answers/compression.ts';
import { BUFFER_OVERHEAD_BYTES, ENTRY_OVERHEAD_BYTES, PageCache } from '../../src/http/answers/page-cache.ts';
import type { Representation } from '../../src/http/answers/representation.ts';
import { PetJsonCache } from '../../src/storage/sqlite/pet-json-cache.ts';

const page = (n: number) => ({ body: `[${n}]`, link: `<${n}>`, etag: `"${n}"`, encoded: {} as Representation['encoded'] });
/** Bytes the cache counts for page(n) under a key of one character: key, body, link, tag and the overhead. */
const pageBytes = (n: number) => ENTRY_OVERHEAD_BYTES + 1 + 2 * `[${n}]`.length + `"${n}"`.length;
/** Room for `count` pages of one digit. */
const roomFor = (count: number) => count * pageBytes(1);
const final = (maxBytes: number, now = () => 0) => new PageCache({ maxBytes, ttlMs: Infinity, now });
const fields = (p: { body: string; link: string; etag: string; encoded: object } | undefined) =>
  p && { body: p.body, link: p.link, etag: p.etag, encoded: p.encoded };

test('evicts the least recently used page beyond its byte budget', () => {
  const cache = final(roomFor(2));
  cache.set('a', page(1));
  cache.set('b', page(2));
  assert.deepEqual(fields(cache.get('a')), page(1)); // a is now the most recent
  cache.set('c', page(3));
  assert.equal(cache.get('b'), undefined);
  assert.deepEqual(fields(cache.get('a')), page(1));
  assert.deepEqual(fields(cache.get('c')), page(3));
});

test('a budget of 0 bytes, or a lifetime of 0, keeps nothing', () => {
  for (const cache of [final(0), new PageCache({ maxBytes: roomFor(10), ttlMs: 0, now: () => 0 })]) {
    cache.set('a', page(1));
    assert.equal(cache.get('a'), undefined);
    assert.equal(cache.bytes, 0);
  }
});

test('a page is served for its lifetime after it was read, then read again', () => {
  let now = 1_000;
  const cache = new PageCache({ maxBytes: roomFor(10), ttlMs: 1000, now: () => now });
  cache.set('a', page(1));
  now += 999;
  assert.deepEqual(fields(cache.get('a')), page(1));
  now += 1;
  assert.equal(cache.get('a'), undefined, 'expired');
  assert.equal(cache.get('a'), undefined, 'and gone');
});

test('expired pages no one asks for again are dropped as new ones are kept, not held until the cache is full', () => {
  let now = 1_000;
  const cache = new PageCache({ maxBytes: roomFor(1000), ttlMs: 1000, now: () => now });
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
  const cache = final(roomFor(10), () => now);
  cache.set('a', page(1));
  now = Number.MAX_SAFE_INTEGER;
  assert.deepEqual(fields(cache.get('a')), page(1));
});

test('a hit shares the compressed forms of the page, so each is made once', () => {
  const cache = final(roomFor(10));
  const original = page(1);
  cache.set('a', original);
  const compressed = Buffer.from('br bytes');
  cache.get('a')!.encoded.br = compressed;
  assert.equal(cache.get('a')!.encoded.br, compressed);
});

test('counts the key, body, tag and Link of each page, and gives the bytes back when a page leaves', () => {
  const cache = final(roomFor(10));
  cache.set('a', page(1));
  assert.equal(cache.bytes, pageBytes(1));
  cache.set('b', page(22));
  assert.equal(cache.bytes, pageBytes(1) + pageBytes(22));
  cache.set('a', page(3)); // replaced: counted once
  assert.equal(cache.bytes, pageBytes(3) + pageBytes(22));
  assert.equal(cache.size, 2);
});

test('counts two bytes a character for text that is not all ASCII, as V8 holds it', () => {
  const cache = final(roomFor(10));
  cache.set('a', { ...page(1), body: '["é"]' });
  assert.equal(cache.bytes, ENTRY_OVERHEAD_BYTES + 1 + 2 * '["é"]'.length + '<1>'.length + '"1"'.length);
});

test('counts each compressed form once it is added, by the whole memory its bytes keep alive', () => {
  const cache = final(10 * 1024 * 1024);
  const kept = page(1);
  cache.set('a', kept);
  kept.encoded.gzip = Buffer.alloc(300);
  cache.remeasure('a');
  assert.equal(cache.bytes, pageBytes(1) + 300 + BUFFER_OVERHEAD_BYTES);
  kept.encoded.br = Buffer.alloc(1000).subarray(0, 200); // a view on a larger buffer holds all of it
  cache.remeasure('a');
  assert.equal(cache.bytes, pageBytes(1) + 300 + 1000 + 2 * BUFFER_OVERHEAD_BYTES);
  cache.set('a', page(1));
  assert.equal(cache.bytes, pageBytes(1), 'a fresh page in its place has no compressed forms');
});

test('a compressed form that outgrows the budget evicts the least recently used pages, then the page itself', () => {
  const cache = final(roomFor(3) + 500);
  const grown = page(3);
  cache.set('a', page(1));
  cache.set('b', page(2));
  cache.set('c', grown);
  grown.encoded.gzip = Buffer.alloc(600 - BUFFER_OVERHEAD_BYTES);
  cache.remeasure('c'); // 600 more than three pages: the oldest goes
  assert.equal(cache.get('a'), undefined);
  assert.ok(cache.get('b'));
  assert.ok(cache.get('c'));
  assert.equal(cache.bytes, 2 * pageBytes(1) + 600);
  grown.encoded.br = Buffer.alloc(roomFor(3));
  cache.remeasure('c'); // now larger than the whole budget alone
  assert.equal(cache.get('c'), undefined);
  assert.ok(cache.get('b'), 'the others stay');
  assert.equal(cache.bytes, pageBytes(2));
});

test('a page larger than the whole budget is not kept, and evicts nothing', () => {
  const cache = final(roomFor(2));
  cache.set('a', page(1));
  cache.set('big', { ...page(2), body: 'x'.repeat(roomFor(2)) });
  assert.equal(cache.get('big'), undefined);
  assert.ok(cache.get('a'));
  assert.equal(cache.bytes, pageBytes(1));
});

test('remeasuring a key that is not held does nothing', () => {
  const cache = final(roomFor(2));
  cache.remeasure('a');
  assert.equal(cache.bytes, 0);
});

test('expired pages give their bytes back when dropped or found expired', () => {
  let now = 0;
  const cache = new PageCache({ maxBytes: roomFor(10), ttlMs: 100, now: () => now });
  cache.set('a', page(1));
  cache.set('b', page(2));
  now = 100;
  assert.equal(cache.get('a'), undefined);
  assert.equal(cache.bytes, pageBytes(2));
  cache.set('c', page(3)); // drops 'b', expired
  assert.equal(cache.bytes, pageBytes(3));
});

test('a compressed form holds memory of its own size only, not the whole output chunk of the compressor', () => {
  const body = JSON.stringify(Array.from({ length: 100 }, (_, id) => ({ id, name: 'Rex', categoryId: 1, status: 'available' })));
  for (const coding of ['br', 'gzip'] as const) {
    const coded = compress(body, coding);
    assert.equal(coded.buffer.byteLength, coded.length, coding);
  }
});

test("SQLite's pets' JSON for pages stays within its bytes as well as its count, oldest first out", () => {
  const json = new PetJsonCache(10_000);
  const text = (id: number) => `{"id":${id},"name":"${'\u00e9\u0101'.repeat(500)}"}`; // two-byte text: about 2 KB each
  for (let id = 1; id <= 10_000; id++) json.set(String(id), text(id));
  assert.ok(json.bytes <= 8 * 1024 * 1024, `${json.bytes} bytes`);
  assert.ok(json.bytes > 7 * 1024 * 1024, 'filled to its budget');
  assert.equal(json.get('1'), undefined, 'the oldest went first');
  assert.equal(json.get('10000'), text(10_000));
  const small = new PetJsonCache(2);
  for (const id of ['1', '2', '3']) small.set(id, '{}');
  assert.deepEqual([small.get('1'), small.get('2'), small.get('3')], [undefined, '{}', '{}'], 'the count still binds');
});
