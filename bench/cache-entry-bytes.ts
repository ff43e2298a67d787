/**
 * The fixed bytes the caches count for each entry and each Buffer, measured rather than guessed. Each
 * measurement runs in a process of its own, started as `npm start` starts the server, with --expose-gc
 * (and --no-flush-bytecode, so that no code freed between the two readings passes for the caches'):
 * - a Buffer (the compressed forms, and bodies that are not ASCII): the RSS that 100,000 more of them
 *   add, less their bytes, of which so much is on the V8 heap and the rest outside it;
 * - an entry of the page cache (list pages of 100, in three codings) and of the pet cache (pets by id),
 *   filled by the real app over real HTTP on SQLite, with pets of ordinary names and of hostile ones (99
 *   control characters and a euro sign): the heap and external bytes that 1,024 more entries add after a
 *   full collection, less what the cache counts for their texts and buffers (its gauge on /metrics, less
 *   the fixed bytes it adds) and the Buffers' objects on the heap;
 * - an entry of SQLite's pets' JSON (pet-json-cache.ts), filled by reading pages from the store: the
 *   heap bytes 1,024 more pets add, less their id's and text's strings.
 * Each second fill takes the Map from 1,025 entries to 2,049, so its table doubles once on the way: the
 * fixed bytes include the table at its emptiest, the most an entry's share of it comes to.
 * Prints what each measurement finds beside the constant the caches count.
 * Usage: node bench/cache-entry-bytes.ts [--only=pages|pets|pet-json|buffer]
 */
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startLaunch } from '../scripts/start-command.ts';
import { CursorCodec } from '../src/domain/cursor.ts';
import { stringBytes } from '../src/domain/string-bytes.ts';
import { petJson } from '../src/domain/pet-json.ts';
import type { Pet } from '../src/domain/pet.ts';
import { BUFFER_OVERHEAD_BYTES, PAGE_ENTRY_OVERHEAD_BYTES, PET_ENTRY_OVERHEAD_BYTES } from '../src/http/answers/page-cache.ts';
import { PET_JSON_ENTRY_OVERHEAD_BYTES } from '../src/storage/sqlite/pet-json-cache.ts';
import { openSqliteStore } from '../src/storage/sqlite/store.ts';
import { call, startTestServer, type TestServer } from '../test/support/servers.ts';
import { tempDir } from '../test/support/temp.ts';

const { values: args } = parseArgs({ options: { measure: { type: 'string' }, only: { type: 'string' } } });

/** Control characters that are not white space, each escaped to six bytes of JSON, and one two-byte character. */
const CONTROLS = [...Array.from({ length: 8 }, (_, i) => i + 1), ...Array.from({ length: 18 }, (_, i) => i + 14)];
const hostileName = (seed: number) =>
  Array.from({ length: 99 }, (_, i) => String.fromCharCode(CONTROLS[(seed * 31 + i * 7) % CONTROLS.length]!)).join('') + '\u20ac';
const ordinaryName = (seed: number) => `Rex the ${seed % 7 === 0 ? 'beagle' : 'terrier'} ${seed}`;

interface Memory {
  heapAndExternal: number;
  rss: number;
}

function memory(): Memory {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  gc();
  gc();
  const { heapUsed, external, rss } = process.memoryUsage();
  return { heapAndExternal: heapUsed + external, rss };
}

/** What a measurement prints: the bytes per entry (or Buffer) it found beyond what is counted without overheads. */
interface Finding {
  what: string;
  overhead: number;
  constant: number;
  detail: string;
}

/**
 * Entries before and after the second fill: just past a doubling of the Map's table each time, so the
 * entries the second fill adds pay for the table's growth too, at its worst (half empty).
 */
const BEFORE = 1025;
const AFTER = 2049;

/** What 100,000 more Buffers of `size` bytes add to RSS, less their bytes: their objects on the V8 heap and the rest outside it. */
async function measureBuffers(size: number): Promise<Finding> {
  const kept: Buffer[] = [];
  const fill = (count: number) => {
    for (let i = 0; i < count; i++) kept.push(Buffer.allocUnsafeSlow(size).fill(i));
  };
  fill(20_000);
  const before = memory();
  const heapBefore = process.memoryUsage().heapUsed;
  fill(100_000);
  const after = memory();
  const heap = (process.memoryUsage().heapUsed - heapBefore) / 100_000;
  const beyond = (after.rss - before.rss) / 100_000 - size;
  return {
    what: `a Buffer of ${size} bytes`,
    overhead: Math.round(beyond),
    constant: BUFFER_OVERHEAD_BYTES,
    detail: `${heap.toFixed(0)} on the V8 heap, ${(beyond - heap).toFixed(0)} outside it (RSS)`,
  };
}

async function metric(server: TestServer, token: string, what: 'bytes' | 'entries', cache: string): Promise<number> {
  const text = (await call(server, 'GET', '/metrics', { key: token })).text;
  const line = text.split('\n').find((l) => l.startsWith(`petstore_cache_${what}{cache="${cache}"} `));
  if (!line) throw new Error(`no petstore_cache_${what} for ${cache}`);
  return Number(line.split(' ').at(-1));
}

/**
 * Entries of the page or pet cache filled over HTTP (pages of 100 in three codings, or pets by id):
 * the heap and external bytes the second fill adds an entry, beyond what the cache counts for its
 * texts and buffers. A Buffer's objects on the heap are BUFFER_OVERHEAD_BYTES' business, so left out.
 */
async function measureAppCache(cache: 'pages' | 'pets', hostile: boolean): Promise<Finding> {
  const token = 'metrics-token-0123456789';
  const server = await startTestServer({ pageCacheBytes: 2 ** 30, petCacheBytes: 2 ** 30, metricsToken: token });
  try {
    const key = await server.key('enterprise', { rpm: 10_000_000, rpd: 100_000_000 });
    const name = hostile ? hostileName : ordinaryName;
    const pets = cache === 'pages' ? AFTER + 101 : AFTER;
    for (let i = 0; i < pets; i++) await server.store.createPet({ name: name(i), categoryId: 1n, status: 'available' });
    // SQLite's pets' JSON takes every pet now, so that it does not grow beside the page cache.
    for (let after = 0; after < pets; after += 100)
      await server.store.listPetsJson({ status: undefined, afterId: BigInt(after), limit: 100 });
    const cursors = new CursorCodec(await server.store.cursorSecret());
    const get = async (path: string, coding: string) => {
      const answer = await fetch(server.url + path, { headers: { authorization: `Bearer ${key}`, 'accept-encoding': coding } });
      await answer.arrayBuffer();
      if (answer.status !== 200) throw new Error(`${path} answered ${answer.status}`);
    };
    // Entry i: the pet of id i + 1, or the page of 100 after it, each full.
    const fill = async (from: number, to: number) => {
      for (let i = from; i < to; i++) {
        if (cache === 'pets') await get(`/v1/pets/${i + 1}`, 'identity');
        else
          for (const coding of ['identity', 'gzip', 'br'])
            await get(`/v1/pets?limit=100&cursor=${cursors.encode({ afterId: BigInt(i + 1), status: undefined })}`, coding);
      }
    };
    const counts = async () => ({
      bytes: await metric(server, token, 'bytes', cache),
      entries: await metric(server, token, 'entries', cache),
    });
    await fill(0, BEFORE);
    const before = { memory: memory(), ...(await counts()) };
    await fill(BEFORE, AFTER);
    const after = { memory: memory(), ...(await counts()) };
    if (before.entries !== BEFORE || after.entries !== AFTER) throw new Error(`${before.entries} then ${after.entries} entries`);
    const entries = AFTER - BEFORE;
    // Buffers an entry holds: its compressed forms (a page of 100 pets is over the threshold), and its body unless ASCII.
    const buffers = (cache === 'pages' ? 2 : 0) + (hostile ? 1 : 0);
    const counted = (after.bytes - before.bytes) / entries;
    const overhead = cache === 'pages' ? PAGE_ENTRY_OVERHEAD_BYTES : PET_ENTRY_OVERHEAD_BYTES;
    const content = counted - overhead - buffers * BUFFER_OVERHEAD_BYTES;
    const held = (after.memory.heapAndExternal - before.memory.heapAndExternal) / entries;
    const bufferObjects = buffers * bufferHeapBytes();
    return {
      what: `${cache === 'pages' ? 'a list page (3 codings)' : 'a pet by id'}, ${hostile ? 'hostile' : 'ordinary'} names`,
      overhead: Math.round(held - content - bufferObjects),
      constant: overhead,
      detail: `counted ${counted.toFixed(0)} an entry, held ${held.toFixed(0)} (heap and external), ${bufferObjects.toFixed(0)} of it Buffers' objects`,
    };
  } finally {
    await server.close();
  }
}

/** A Buffer's objects on the V8 heap. */
function bufferHeapBytes(): number {
  const kept: Buffer[] = [];
  memory();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < 10_000; i++) kept.push(Buffer.allocUnsafeSlow(100));
  memory();
  const bytes = (process.memoryUsage().heapUsed - before) / kept.length;
  kept.length = 0;
  return bytes;
}

/** SQLite's pets' JSON, filled by reading pages from the store: the heap bytes a pet of the second fill adds beyond its strings. */
async function measurePetJson(hostile: boolean): Promise<Finding> {
  const dir = tempDir();
  const store = openSqliteStore({ path: join(dir, 'petstore.db'), synchronous: 'normal' });
  try {
    const pets: Pet[] = [];
    for (let i = 0; i < AFTER; i++)
      pets.push(await store.createPet({ name: (hostile ? hostileName : ordinaryName)(i), categoryId: 1n, status: 'available' }));
    const read = async (from: number, to: number) => {
      for (let after = from; after < to; after += Math.min(100, to - after)) {
        await store.listPetsJson({ status: undefined, afterId: BigInt(after), limit: Math.min(100, to - after) });
      }
    };
    await read(0, BEFORE);
    const before = memory();
    await read(BEFORE, AFTER);
    const after = memory();
    const added = pets.slice(BEFORE, AFTER);
    const content = added.reduce((sum, pet) => sum + stringBytes(String(pet.id)) + stringBytes(petJson(pet)), 0) / added.length;
    const held = (after.heapAndExternal - before.heapAndExternal) / added.length;
    return {
      what: `SQLite's pet JSON, ${hostile ? 'hostile' : 'ordinary'} names`,
      overhead: Math.round(held - content),
      constant: PET_JSON_ENTRY_OVERHEAD_BYTES,
      detail: `strings ${content.toFixed(0)} a pet, held ${held.toFixed(0)} (heap)`,
    };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const MEASUREMENTS: Record<string, () => Promise<Finding>> = {
  'buffer-300': () => measureBuffers(300),
  'buffer-2000': () => measureBuffers(2_000),
  'buffer-8000': () => measureBuffers(8_000),
  'pages-ordinary': () => measureAppCache('pages', false),
  'pages-hostile': () => measureAppCache('pages', true),
  'pets-ordinary': () => measureAppCache('pets', false),
  'pets-hostile': () => measureAppCache('pets', true),
  'pet-json-ordinary': () => measurePetJson(false),
  'pet-json-hostile': () => measurePetJson(true),
};

if (args.measure) {
  const measurement = MEASUREMENTS[args.measure];
  if (!measurement) throw new Error(`no measurement ${args.measure}`);
  console.log(JSON.stringify(await measurement()));
} else {
  const launch = startLaunch();
  const rows: string[] = [];
  for (const name of Object.keys(MEASUREMENTS).filter((n) => !args.only || n.startsWith(args.only))) {
    const output = execFileSync(
      process.execPath,
      ['--expose-gc', '--no-flush-bytecode', ...launch.flags, import.meta.filename, `--measure=${name}`],
      {
        env: { ...process.env, ...launch.env },
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const f = JSON.parse(output.trim().split('\n').at(-1)!) as Finding;
    rows.push(`| ${f.what} | ${f.overhead} | ${f.constant} | ${f.detail} |`);
  }
  console.log(['| Measured | Bytes beyond the counted content | Counted | |', '|---|---:|---:|---|', ...rows].join('\n'));
}
