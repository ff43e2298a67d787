/**
 * A fixed-size hash table in one SharedArrayBuffer, read and written by every thread of the process that is
 * handed the buffer: the in-process limiter's counts (docs/rate-limits.md, "Memory"), which workers of one
 * process are to share.
 *
 * Each record is a key (a limiter subject) and a fixed number of float64 fields. Keys are spread over lock
 * stripes by their hash; a thread works on a record only while it holds its key's stripe, so a decision over
 * a record's fields is atomic for the process as one callback is for one thread. An index of twice as many
 * slots as records points at records; a key's slot is within NEIGHBOURHOOD slots of its hash's home, so a
 * lookup reads at most that many. Records are handed out in order from the start of their region and reused
 * once removed: the memory a process touches grows with the keys it holds, not with the table's size. A
 * table with no record free, or no slot near a new key's home, refuses it (-1) rather than evict one: every
 * record may be a live window.
 *
 * A stripe's lock word holds its holder's number (threadId + 1), so that the threads still serving can take
 * back the stripes of a thread that ended while holding one (releaseHeldBy). Work inside a stripe is short and
 * never awaits.
 */
import { randomInt } from 'node:crypto';
import { threadId } from 'node:worker_threads';

/** How far from its home slot a key may live: lookups read at most this many slots. */
export const NEIGHBOURHOOD = 32;
/** UTF-16 code units a key may have: room for every limiter subject (the longest, about 55) and a mark's prefix. */
export const KEY_UNITS = 64;

const STRIPES = 1024;
const MAGIC = 0x7065_7473; // "pets"
// The header's Int32 words.
const H_MAGIC = 0;
const H_RECORDS = 1;
const H_FIELDS = 2;
const H_SEED = 3;
/** The first free record + 1 (0: none); each free record holds the next in its key length word. */
const H_FREE = 4;
/** Records never handed out start here. */
const H_FRESH = 5;
const H_COUNT = 6;
/** The lock over H_FREE and H_FRESH. */
const H_ALLOCATING = 7;
const HEADER_INTS = 8;
// An index slot is two Int32 words: what it holds, then the key's hash.
const EMPTY = 0;
/** Held by an insert of another stripe while it fills the slot. */
const CLAIMED = -1;
/** Held a key once: a lookup reads past it, an insert may take it. */
const REMOVED = -2;
// Anything above 0 is a record's number + 1.

/** How long a waiting thread sleeps at most before it looks at a stripe again (its holder may have ended). */
const WAIT_SLICE_MS = 5;
/** Tries at a held stripe before a thread sleeps: a decision holds one for about a microsecond. */
const SPINS = 64;

const me = threadId + 1;

const align8 = (n: number) => (n + 7) & ~7;

interface Layout {
  locksAt: number;
  indexAt: number;
  keyLengthsAt: number;
  keysAt: number;
  valuesAt: number;
  bytes: number;
}

function layoutOf(records: number, fields: number): Layout {
  const locksAt = HEADER_INTS * 4;
  const indexAt = align8(locksAt + STRIPES * 2 * 4);
  const keyLengthsAt = align8(indexAt + 2 * records * 2 * 4);
  const keysAt = align8(keyLengthsAt + records * 4);
  const valuesAt = align8(keysAt + records * KEY_UNITS * 2);
  return { locksAt, indexAt, keyLengthsAt, keysAt, valuesAt, bytes: valuesAt + records * fields * 8 };
}

export class SharedTable {
  /** The records a buffer of at most `bytes` holds (at least NEIGHBOURHOOD). */
  static recordsFor(bytes: number, fields: number): number {
    const perRecord = 2 * 2 * 4 + 4 + KEY_UNITS * 2 + fields * 8;
    return Math.max(NEIGHBOURHOOD, Math.floor((bytes - layoutOf(0, fields).bytes - 32) / perRecord));
  }

  /** A new, empty table's buffer, to hand to every thread that shares it. */
  static allocate(records: number, fields: number): SharedArrayBuffer {
    if (!Number.isInteger(records) || records < NEIGHBOURHOOD)
      throw new RangeError(`a shared table needs ${NEIGHBOURHOOD} records or more`);
    const buffer = new SharedArrayBuffer(layoutOf(records, fields).bytes);
    const header = new Int32Array(buffer, 0, HEADER_INTS);
    header[H_RECORDS] = records;
    header[H_FIELDS] = fields;
    header[H_SEED] = randomInt(2 ** 31); // the hash's seed: no client can aim its subjects at one neighbourhood
    header[H_MAGIC] = MAGIC;
    return buffer;
  }

  readonly buffer: SharedArrayBuffer;
  readonly records: number;
  readonly fields: number;
  /** Every record's fields: record r at [r * fields, (r + 1) * fields). */
  readonly values: Float64Array;
  readonly #seed: number;
  readonly #slots: number;
  readonly #header: Int32Array;
  /** Per stripe: the holder (0: free), then how many threads wait for it. */
  readonly #locks: Int32Array;
  readonly #index: Int32Array;
  readonly #keyLengths: Int32Array;
  readonly #keys: Uint16Array;
  /** The stripe this thread holds (-1: none), and the index slot of the record acquire returned. */
  #held = -1;
  #heldSlot = -1;

  constructor(buffer: SharedArrayBuffer) {
    const header = new Int32Array(buffer, 0, HEADER_INTS);
    if (header[H_MAGIC] !== MAGIC) throw new Error('not a shared table');
    this.buffer = buffer;
    this.#header = header;
    this.records = header[H_RECORDS]!;
    this.fields = header[H_FIELDS]!;
    this.#seed = header[H_SEED]!;
    this.#slots = 2 * this.records;
    const layout = layoutOf(this.records, this.fields);
    this.#locks = new Int32Array(buffer, layout.locksAt, STRIPES * 2);
    this.#index = new Int32Array(buffer, layout.indexAt, this.#slots * 2);
    this.#keyLengths = new Int32Array(buffer, layout.keyLengthsAt, this.records);
    this.#keys = new Uint16Array(buffer, layout.keysAt, this.records * KEY_UNITS);
    this.values = new Float64Array(buffer, layout.valuesAt, this.records * this.fields);
  }

  /**
   * Takes the key's stripe and returns the key's record: -1 when it has none (and `create` is false, or there
   * is no room for one). A created record's fields are zero. The caller works on the record's fields, never
   * awaiting, then calls release(); a thread holds one stripe at a time.
   */
  acquire(key: string, create: boolean): number {
    if (this.#held >= 0) throw new Error('a shared table stripe is already held by this thread');
    // Kept as itself, never shortened: a digest would hide what the key says (a mark's prefix, a subject's name) from keys().
    if (key.length > KEY_UNITS)
      throw new RangeError(`a shared table key has at most ${KEY_UNITS} characters: ${key.slice(0, KEY_UNITS)}...`);
    const hash = this.#hash(key);
    const stripe = hash & (STRIPES - 1);
    this.#lock(stripe);
    this.#held = stripe;
    const record = this.#find(key, hash);
    return record < 0 && create ? this.#insert(key, hash) : record;
  }

  release(): void {
    const stripe = this.#held;
    this.#held = -1;
    this.#heldSlot = -1;
    if (stripe >= 0) this.#unlock(stripe);
  }

  /** Removes the record acquire returned, whose stripe this thread still holds. */
  remove(): void {
    const slot = this.#heldSlot;
    if (slot < 0) throw new Error('removing from a shared table without holding a record');
    const record = Atomics.load(this.#index, slot * 2) - 1;
    Atomics.store(this.#index, slot * 2, REMOVED);
    this.#heldSlot = -1;
    this.#free(record);
  }

  /** Removes every record: for a table no other thread uses. */
  clear(): void {
    this.#index.fill(EMPTY);
    Atomics.store(this.#header, H_FREE, 0);
    Atomics.store(this.#header, H_FRESH, 0);
    Atomics.store(this.#header, H_COUNT, 0);
  }

  /** The keys of the records held now (each may be removed, and its record reused, as soon as it is read). */
  *keys(): Generator<string> {
    for (let slot = 0; slot < this.#slots; slot++) {
      const held = Atomics.load(this.#index, slot * 2);
      if (held <= 0) continue;
      // Read without the stripe: a key removed and its record reused meanwhile reads torn; it is looked up again under it.
      const key = this.#keyOf(held - 1);
      if (Atomics.load(this.#index, slot * 2) === held) yield key;
    }
  }

  /** How many records are held now. */
  get size(): number {
    return Atomics.load(this.#header, H_COUNT);
  }

  /**
   * Frees the stripes held by a thread that ended (its threadId): the threads that serve on are never kept
   * waiting by one that is gone. A record it was changing keeps what it had written.
   */
  releaseHeldBy(endedThreadId: number): number {
    if (!(endedThreadId >= 1)) throw new RangeError(`not a worker's threadId: ${endedThreadId}`);
    let released = 0;
    for (let stripe = 0; stripe < STRIPES; stripe++) {
      if (Atomics.compareExchange(this.#locks, stripe * 2, endedThreadId + 1, 0) === endedThreadId + 1) {
        Atomics.notify(this.#locks, stripe * 2);
        released++;
      }
    }
    if (Atomics.compareExchange(this.#header, H_ALLOCATING, endedThreadId + 1, 0) === endedThreadId + 1) released++;
    return released;
  }

  /** FNV-1a over the key's UTF-16 code units, from the table's seed. Its low bits name the stripe. */
  #hash(key: string): number {
    let h = 0x811c9dc5 ^ this.#seed;
    for (let i = 0; i < key.length; i++) {
      h ^= key.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    return h | 0;
  }

  /**
   * The key's record, or -1. A slot whose hash is the key's belongs to the held stripe, which no other thread
   * changes; any other slot is passed by its hash alone, whatever other stripes do to it meanwhile.
   */
  #find(key: string, hash: number): number {
    const index = this.#index;
    for (let i = 0; i < NEIGHBOURHOOD; i++) {
      const slot = (((hash >>> 0) + i) % this.#slots) * 2;
      const held = Atomics.load(index, slot);
      if (held === EMPTY) return -1;
      if (held > 0 && Atomics.load(index, slot + 1) === hash && Atomics.load(index, slot) === held && this.#keyIs(held - 1, key)) {
        this.#heldSlot = slot / 2;
        return held - 1;
      }
    }
    return -1;
  }

  /**
   * A record for a key known to be absent (its stripe is held), in a slot claimed from other stripes' inserts;
   * -1 when there is no room. The record is taken first: a slot once claimed is never let go back to empty,
   * which would hide a key another insert placed past it meanwhile.
   */
  #insert(key: string, hash: number): number {
    const record = this.#allocate();
    if (record < 0) return -1;
    this.#keyLengths[record] = key.length;
    const from = record * KEY_UNITS;
    for (let k = 0; k < key.length; k++) this.#keys[from + k] = key.charCodeAt(k);
    this.values.fill(0, record * this.fields, (record + 1) * this.fields);
    const index = this.#index;
    for (let i = 0; i < NEIGHBOURHOOD; i++) {
      const slot = (((hash >>> 0) + i) % this.#slots) * 2;
      const held = Atomics.load(index, slot);
      if (held !== EMPTY && held !== REMOVED) continue;
      if (Atomics.compareExchange(index, slot, held, CLAIMED) !== held) continue;
      Atomics.store(index, slot + 1, hash);
      Atomics.store(index, slot, record + 1); // publishes the slot, its key and its fields
      this.#heldSlot = slot / 2;
      return record;
    }
    this.#free(record);
    return -1;
  }

  #allocate(): number {
    const header = this.#header;
    this.#lockAllocation();
    try {
      const free = header[H_FREE]!;
      let record: number;
      if (free > 0) {
        record = free - 1;
        header[H_FREE] = this.#keyLengths[record]!;
      } else if (header[H_FRESH]! < this.records) {
        record = header[H_FRESH]!;
        header[H_FRESH] = record + 1;
      } else return -1;
      header[H_COUNT] = header[H_COUNT]! + 1;
      return record;
    } finally {
      this.#unlockAllocation();
    }
  }

  #free(record: number): void {
    const header = this.#header;
    this.#lockAllocation();
    this.#keyLengths[record] = header[H_FREE]!;
    header[H_FREE] = record + 1;
    header[H_COUNT] = header[H_COUNT]! - 1;
    this.#unlockAllocation();
  }

  /** Allocation is rare (a new subject) and brief: a spin, then sleeps until the holder lets go (or a slice passes). */
  #lockAllocation(): void {
    for (let tries = 0; ; tries++) {
      const holder = Atomics.compareExchange(this.#header, H_ALLOCATING, 0, me);
      if (holder === 0) return;
      if (tries > SPINS) Atomics.wait(this.#header, H_ALLOCATING, holder, WAIT_SLICE_MS);
    }
  }

  #unlockAllocation(): void {
    Atomics.store(this.#header, H_ALLOCATING, 0);
    Atomics.notify(this.#header, H_ALLOCATING, 1);
  }

  #keyIs(record: number, key: string): boolean {
    if (this.#keyLengths[record] !== key.length) return false;
    const keys = this.#keys;
    const from = record * KEY_UNITS;
    for (let k = 0; k < key.length; k++) if (keys[from + k] !== key.charCodeAt(k)) return false;
    return true;
  }

  #keyOf(record: number): string {
    const from = record * KEY_UNITS;
    const length = Math.min(KEY_UNITS, Math.max(0, this.#keyLengths[record]!));
    return String.fromCharCode(...this.#keys.subarray(from, from + length));
  }

  #lock(stripe: number): void {
    const locks = this.#locks;
    const at = stripe * 2;
    if (Atomics.compareExchange(locks, at, 0, me) === 0) return;
    for (let i = 0; i < SPINS; i++) if (Atomics.load(locks, at) === 0 && Atomics.compareExchange(locks, at, 0, me) === 0) return;
    Atomics.add(locks, at + 1, 1);
    for (;;) {
      const holder = Atomics.load(locks, at);
      if (holder === 0) {
        if (Atomics.compareExchange(locks, at, 0, me) === 0) break;
        continue;
      }
      Atomics.wait(locks, at, holder, WAIT_SLICE_MS);
    }
    Atomics.sub(locks, at + 1, 1);
  }

  #unlock(stripe: number): void {
    const locks = this.#locks;
    const at = stripe * 2;
    Atomics.store(locks, at, 0);
    if (Atomics.load(locks, at + 1) > 0) Atomics.notify(locks, at, 1);
  }
}
