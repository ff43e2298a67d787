/**
 * The shared table (src/limits/shared-table.ts): records found again by their exact key, a full neighbourhood
 * refusing a new key rather than evicting one, and several threads counting on the same records exactly.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { KEY_UNITS, NEIGHBOURHOOD, SharedTable } from '../../src/limits/shared-table.ts';

const FIELDS = 3;

function tableOf(capacity: number): SharedTable {
  return new SharedTable(SharedTable.allocate(capacity, FIELDS));
}

/** The key's first field, or undefined when it has no record. */
function read(table: SharedTable, key: string): number | undefined {
  const slot = table.acquire(key, false);
  try {
    return slot < 0 ? undefined : table.values[slot * FIELDS]!;
  } finally {
    table.release();
  }
}

function add(table: SharedTable, key: string, n: number): boolean {
  const slot = table.acquire(key, true);
  try {
    if (slot < 0) return false;
    table.values[slot * FIELDS] = table.values[slot * FIELDS]! + n;
    return true;
  } finally {
    table.release();
  }
}

/** A worker thread running `body` with `table` (a SharedTable on the buffer passed) and `data`. */
function startWorker(buffer: SharedArrayBuffer, data: unknown, body: string): Worker {
  const module = new URL('../../src/limits/shared-table.ts', import.meta.url).href;
  const source = `
    const { workerData, parentPort } = require('node:worker_threads');
    import(${JSON.stringify(module)}).then(async ({ SharedTable }) => {
      const table = new SharedTable(workerData.buffer);
      const data = workerData.data;
      ${body}
    });`;
  return new Worker(source, { eval: true, workerData: { buffer, data } });
}

describe('shared table', () => {
  test('a record is found again by its exact key, created with zero fields, and removed', () => {
    const table = tableOf(1024);
    assert.equal(read(table, 'key:a'), undefined);
    assert.ok(add(table, 'key:a', 5));
    assert.ok(add(table, 'key:b', 7));
    assert.ok(add(table, 'key:a', 1));
    assert.equal(read(table, 'key:a'), 6);
    assert.equal(read(table, 'key:b'), 7);
    assert.equal(read(table, 'key:A'), undefined, 'keys differ by their exact text');
    assert.equal(table.size, 2);
    assert.deepEqual([...table.keys()].sort(), ['key:a', 'key:b']);

    assert.ok(table.acquire('key:a', false) >= 0);
    table.remove();
    table.release();
    assert.equal(read(table, 'key:a'), undefined);
    assert.equal(read(table, 'key:b'), 7, 'a key after a removed one is still found');
    assert.ok(add(table, 'key:a', 2));
    assert.equal(read(table, 'key:a'), 2, 'a record made again starts from zero');
  });

  test('a key longer than a slot holds is refused, never shortened to something else', () => {
    const table = tableOf(1024);
    assert.ok(add(table, `addr:${'x'.repeat(KEY_UNITS - 5)}`, 1), 'a key of exactly KEY_UNITS fits');
    assert.throws(() => table.acquire(`addr:${'x'.repeat(KEY_UNITS)}`, true), RangeError);
    assert.ok(add(table, 'key:after', 1), 'nothing is left held');
  });

  test('a table with no record free refuses a new key and keeps every record it holds', () => {
    const table = tableOf(NEIGHBOURHOOD);
    for (let i = 0; i < NEIGHBOURHOOD; i++) assert.ok(add(table, `key:${i}`, i + 1));
    assert.equal(add(table, 'key:one-too-many', 1), false);
    for (let i = 0; i < NEIGHBOURHOOD; i++) assert.equal(read(table, `key:${i}`), i + 1);
    assert.ok(table.acquire('key:0', false) >= 0);
    table.remove();
    table.release();
    assert.ok(add(table, 'key:one-too-many', 1), 'a removed record makes room');
  });

  test('a table made for a number of bytes fits in them, and no more than two more records would', () => {
    for (const bytes of [1 << 20, 3_000_001, 64 << 20]) {
      for (const fields of [1, FIELDS, 26]) {
        const records = SharedTable.recordsFor(bytes, fields);
        assert.ok(SharedTable.allocate(records, fields).byteLength <= bytes, `${records} records of ${fields} fields in ${bytes} bytes`);
        assert.ok(SharedTable.allocate(records + 2, fields).byteLength > bytes, `${records} records: room left for more`);
      }
    }
    assert.equal(SharedTable.recordsFor(1000, FIELDS), NEIGHBOURHOOD, 'never fewer than a neighbourhood');
  });

  test('misuse is refused in words: a buffer that is no table, too few records, a long key, a remove without a record', () => {
    assert.throws(() => new SharedTable(new SharedArrayBuffer(4096)), /not a shared table/);
    assert.throws(() => SharedTable.allocate(NEIGHBOURHOOD - 1, FIELDS), /needs 32 records or more/);
    assert.throws(() => SharedTable.allocate(NEIGHBOURHOOD + 0.5, FIELDS), RangeError);
    const table = tableOf(1024);
    assert.throws(() => table.acquire(`k${'x'.repeat(KEY_UNITS)}`, true), new RegExp(`at most ${KEY_UNITS} characters: kxxx`));
    assert.throws(() => table.remove(), /without holding a record/);
    assert.equal(table.acquire('key:none', false), -1);
    try {
      assert.throws(() => table.remove(), /without holding a record/, 'a stripe held, but no record');
    } finally {
      table.release();
    }
  });

  test('a cleared table holds as many new records as a new one', () => {
    const table = tableOf(NEIGHBOURHOOD);
    for (let i = 0; i < NEIGHBOURHOOD; i++) assert.ok(add(table, `key:${i}`, 1));
    assert.ok(table.acquire('key:5', false) >= 0);
    table.remove(); // its record on the free list when the table is cleared
    table.release();
    table.clear();
    assert.equal(table.size, 0);
    assert.deepEqual([...table.keys()], []);
    for (let i = 0; i < NEIGHBOURHOOD; i++) assert.ok(add(table, `other:${i}`, 2), `other:${i}`);
    assert.equal(add(table, 'one-too-many', 1), false);
    for (let i = 0; i < NEIGHBOURHOOD; i++) assert.equal(read(table, `other:${i}`), 2, 'each its own record');
  });

  test('a thread holds one stripe at a time', () => {
    const table = tableOf(1024);
    table.acquire('key:a', true);
    try {
      assert.throws(() => table.acquire('key:b', true), /already held/);
    } finally {
      table.release();
    }
  });

  test('four threads adding to the same records at once count every addition, one record per key', async () => {
    const buffer = SharedTable.allocate(4096, FIELDS);
    const keys = Array.from({ length: 40 }, (_, i) => `key:${i}`);
    const rounds = 5000;
    const workers = Array.from({ length: 4 }, () =>
      startWorker(
        buffer,
        { keys, rounds },
        `for (let r = 0; r < data.rounds; r++) for (const key of data.keys) {
           const slot = table.acquire(key, true);
           table.values[slot * ${FIELDS}] += 1;
           table.values[slot * ${FIELDS} + 1] = table.values[slot * ${FIELDS}];
           table.release();
         }
         parentPort.postMessage('done');`,
      ),
    );
    await Promise.all(workers.map((w) => once(w, 'message')));
    await Promise.all(workers.map((w) => w.terminate()));
    const table = new SharedTable(buffer);
    assert.equal(table.size, keys.length);
    for (const key of keys) assert.equal(read(table, key), 4 * rounds, key);
  });

  test('threads making and removing records of their own while others count lose no count and leak no record', async () => {
    const buffer = SharedTable.allocate(256, FIELDS);
    const keys = Array.from({ length: 20 }, (_, i) => `key:${i}`);
    const rounds = 2000;
    const workers = Array.from({ length: 4 }, (_, w) =>
      startWorker(
        buffer,
        { keys, rounds, w },
        `for (let r = 0; r < data.rounds; r++) {
           const key = data.keys[r % data.keys.length];
           let slot = table.acquire(key, true);
           table.values[slot * ${FIELDS}] += 1;
           table.release();
           const own = 'tmp:' + data.w + ':' + r;
           slot = table.acquire(own, true);
           if (slot < 0) throw new Error('no room for ' + own);
           table.values[slot * ${FIELDS}] = r;
           table.remove();
           table.release();
         }
         parentPort.postMessage('done');`,
      ),
    );
    await Promise.all(workers.map((w) => once(w, 'message')));
    await Promise.all(workers.map((w) => w.terminate()));
    const table = new SharedTable(buffer);
    assert.equal(table.size, keys.length, 'every removed record was freed');
    for (const key of keys) assert.equal(read(table, key), (4 * rounds) / keys.length, key);
  });

  test('the stripes of a thread that ended holding one are taken back', async () => {
    const buffer = SharedTable.allocate(1024, FIELDS);
    const worker = startWorker(
      buffer,
      undefined,
      `table.acquire('key:held', true); parentPort.postMessage('holding'); setInterval(() => {}, 1000);`,
    );
    await once(worker, 'message');
    const ended = worker.threadId;
    await worker.terminate();
    const table = new SharedTable(buffer);
    assert.equal(table.releaseHeldBy(ended), 1);
    assert.ok(add(table, 'key:held', 1), 'the key is usable again');
    assert.equal(read(table, 'key:held'), 1);
  });

  test('a thread waiting for a stripe another thread holds gets it once released, and sees what was written under it', async () => {
    const buffer = SharedTable.allocate(1024, FIELDS);
    const worker = startWorker(
      buffer,
      undefined,
      `const slot = table.acquire('key:contended', true);
       parentPort.postMessage('holding');
       Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200); // holds the stripe 200 ms
       table.values[slot * ${FIELDS}] = 42;
       table.release();`,
    );
    await once(worker, 'message');
    const table = new SharedTable(buffer);
    // This thread blocks on the stripe (spinning, then sleeping) until the worker lets it go.
    const slot = table.acquire('key:contended', false);
    try {
      assert.ok(slot >= 0);
      assert.equal(table.values[slot * FIELDS], 42, 'taken only once the holder had written and let go');
    } finally {
      table.release();
    }
    await once(worker, 'exit');
  });
});
