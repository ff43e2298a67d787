/**
 * The in-process limiter's counts, kept in a shared table (shared-table.ts) so that every thread of the process
 * that is handed the same table decides on the same counts. A subject's counts are copied out of its record
 * into plain objects while its stripe is held, decided on, and copied back before it is released: the
 * limiter's rules (memory.ts) read as plain code, and a decision is atomic for the whole process.
 *
 * A record: the subject's window count, whether Redis may lack its own counts, its change counter, its first
 * mark, then per window its name, start, end, when it began and ends by the elapsed clock, and its two counts.
 */
import { SharedTable } from './shared-table.ts';

/** One window's count; begun afresh in place when its window has passed. */
export interface Counter {
  name: string;
  /** The window's start and end as its clock names them (epoch ms). */
  start: number;
  end: number;
  /** When it began counting, and when it ends, by the elapsed clock: it ends then, whatever the wall clock says. */
  begunAtElapsed: number;
  endsAtElapsed: number;
  /** Admitted by this instance in this window. */
  own: number;
  /** Counted elsewhere in this window, as last heard (the Redis limiter's other instances); 0 in the embedded limiter. */
  others: number;
}

/** A subject's counters, one per window in the order of its limits. */
export interface SubjectCounts {
  counters: Counter[];
  /** Whether Redis may not hold this instance's own counts (the Redis limiter raises it then). */
  unsynced: boolean;
  /** Bumped at each change of `own` that Redis did not confirm, so a raise knows whether it sent the latest. */
  changes: number;
}

/** The most windows a subject's limits may have (a key has two: minute and day). */
export const MAX_WINDOWS = 3;
const HEAD = 5;
const PER_WINDOW = 7;
export const RECORD_FIELDS = HEAD + PER_WINDOW * MAX_WINDOWS;
/** open's window count for a record's own. */
export const AS_RECORDED = -1;
/** Bytes of the table a limiter makes for itself when none is handed to it. */
export const DEFAULT_LIMITER_BYTES = 16 * 1024 * 1024;
/** A mark's record is kept under its subject behind this character, which no counted subject starts with. */
const MARK = '\u0001';

/** A table for a limiter's records in at most `bytes` (RATE_LIMIT_MEMORY_BYTES), to hand to every thread that shares it. */
export function limiterTable(bytes: number): SharedTable {
  return new SharedTable(SharedTable.allocate(SharedTable.recordsFor(bytes, RECORD_FIELDS), RECORD_FIELDS));
}

/** A subject the table has no room for: answered 503, since counting it would mean forgetting a live window. */
export class LimiterFullError extends Error {
  constructor() {
    super('the rate limiter holds as many clients as its memory allows (RATE_LIMIT_MEMORY_BYTES); none of their windows has ended yet');
    this.name = 'LimiterFullError';
  }
}

/** A window name (up to 7 ASCII characters) as a number a float64 holds exactly, and back. */
export function nameCode(name: string): number {
  if (name.length > 7 || !/^[\x21-\x7e]*$/.test(name)) throw new RangeError(`a window name is 1 to 7 ASCII characters: ${name}`);
  let code = 0;
  for (let i = name.length - 1; i >= 0; i--) code = code * 128 + name.charCodeAt(i);
  return code;
}

const names = new Map<number, string>();
function nameOf(code: number): string {
  let name = names.get(code);
  if (name !== undefined) return name;
  name = '';
  for (let rest = code; rest > 0; rest = Math.floor(rest / 128)) name += String.fromCharCode(rest % 128);
  names.set(code, name);
  return name;
}

const codes = new Map<string, number>();
function codeOf(name: string): number {
  let code = codes.get(name);
  if (code === undefined) codes.set(name, (code = nameCode(name)));
  return code;
}

const freshCounter = (): Counter => ({ name: '', start: -1, end: 0, begunAtElapsed: 0, endsAtElapsed: -Infinity, own: 0, others: 0 });

export class SubjectRecords {
  readonly table: SharedTable;
  /** Whether the table is this one's alone (made for it), which close may empty. */
  readonly #own: boolean;
  /** The slot open now (one at a time per thread), and the counts read from it. */
  #slot = -1;

  constructor(table?: SharedTable) {
    this.#own = table === undefined;
    this.table = table ?? limiterTable(DEFAULT_LIMITER_BYTES);
    if (this.table.fields !== RECORD_FIELDS) throw new Error(`a limiter table has ${RECORD_FIELDS} fields a record`);
  }

  /**
   * The subject's counts for `windows` windows (AS_RECORDED: as many as its record has), its stripe held until
   * close(): read from its record, or fresh when it has none or had other windows. `create`: make the record
   * (LimiterFullError when there is no room); otherwise undefined when there is none.
   */
  open(subject: string, windows: number, create: true): SubjectCounts;
  open(subject: string, windows: number, create: false): SubjectCounts | undefined;
  open(subject: string, windows: number, create: boolean): SubjectCounts | undefined {
    if (windows > MAX_WINDOWS) throw new RangeError(`at most ${MAX_WINDOWS} windows a subject`);
    const slot = this.table.acquire(subject, create);
    if (slot < 0) {
      this.table.release();
      if (create) throw new LimiterFullError();
      return undefined;
    }
    this.#slot = slot;
    return this.#read(slot, windows === AS_RECORDED ? this.table.values[slot * RECORD_FIELDS]! : windows);
  }

  /** Writes the open subject's counts back to its record. */
  save(counts: SubjectCounts): void {
    const v = this.table.values;
    const at = this.#slot * RECORD_FIELDS;
    v[at] = counts.counters.length;
    v[at + 1] = counts.unsynced ? 1 : 0;
    v[at + 2] = counts.changes;
    for (let i = 0; i < counts.counters.length; i++) {
      const c = counts.counters[i]!;
      const b = at + HEAD + PER_WINDOW * i;
      v[b] = c.name === '' ? 0 : codeOf(c.name);
      v[b + 1] = c.start;
      v[b + 2] = c.end;
      v[b + 3] = c.begunAtElapsed;
      v[b + 4] = c.endsAtElapsed;
      v[b + 5] = c.own;
      v[b + 6] = c.others;
    }
  }

  /** Removes the open subject's record. */
  remove(): void {
    this.table.remove();
  }

  close(): void {
    this.#slot = -1;
    this.table.release();
  }

  /**
   * The first mark of the subject's period, as elapsed-clock readings: the one recorded while it has not
   * ended, else `atElapsed`, recorded with its end.
   */
  mark(subject: string, atElapsed: number, endsAtElapsed: number): number {
    const slot = this.table.acquire(MARK + subject, true);
    try {
      if (slot < 0) throw new LimiterFullError();
      const v = this.table.values;
      const at = slot * RECORD_FIELDS;
      if (v[at] === 1 && v[at + 4]! > atElapsed) return v[at + 3]!;
      v[at] = 1;
      v[at + 3] = atElapsed;
      v[at + 4] = endsAtElapsed;
      return atElapsed;
    } finally {
      this.table.release();
    }
  }

  /** Removes every record `keep` (given its counts) lets go, and every mark ended by `elapsed`. */
  sweep(keep: (counts: SubjectCounts) => boolean, elapsed: number): void {
    for (const key of this.table.keys()) {
      const slot = this.table.acquire(key, false);
      try {
        if (slot < 0) continue;
        const at = slot * RECORD_FIELDS;
        const isMark = key.startsWith(MARK);
        const gone = isMark ? this.table.values[at + 4]! <= elapsed : !keep(this.#read(slot, this.table.values[at]!));
        if (gone) this.table.remove();
      } finally {
        this.table.release();
      }
    }
  }

  /** Every subject with counts (marks left out), as the table holds them when each is reached. */
  *subjects(): Generator<string> {
    for (const key of this.table.keys()) if (!key.startsWith(MARK)) yield key;
  }

  /** Every subject with counts, each as a copy of its own read when it is reached. */
  *all(): Generator<[subject: string, counts: SubjectCounts]> {
    for (const key of this.subjects()) {
      const slot = this.table.acquire(key, false);
      let copy: SubjectCounts | undefined;
      try {
        if (slot >= 0) {
          const read = this.#read(slot, this.table.values[slot * RECORD_FIELDS]!);
          copy = { counters: read.counters.map((c) => ({ ...c })), unsynced: read.unsynced, changes: read.changes };
        }
      } finally {
        this.table.release();
      }
      if (copy) yield [key, copy];
    }
  }

  /** Forgets everything, when the table is this one's alone; a shared table outlives one thread's limiter. */
  clear(): void {
    if (this.#own) this.table.clear();
  }

  /** How many subjects and marks are held. */
  get size(): number {
    return this.table.size;
  }

  /** Counts read into objects reused for every read of this many windows (fresh ones when the record has other windows). */
  #read(slot: number, windows: number): SubjectCounts {
    const v = this.table.values;
    const at = slot * RECORD_FIELDS;
    const counts = this.#scratch(windows);
    if (v[at] !== windows) {
      counts.unsynced = false;
      counts.changes = 0;
      for (const c of counts.counters) Object.assign(c, freshCounter());
      return counts;
    }
    counts.unsynced = v[at + 1] === 1;
    counts.changes = v[at + 2]!;
    for (let i = 0; i < windows; i++) {
      const c = counts.counters[i]!;
      const b = at + HEAD + PER_WINDOW * i;
      c.name = nameOf(v[b]!);
      c.start = v[b + 1]!;
      c.end = v[b + 2]!;
      c.begunAtElapsed = v[b + 3]!;
      c.endsAtElapsed = v[b + 4]!;
      c.own = v[b + 5]!;
      c.others = v[b + 6]!;
    }
    return counts;
  }

  readonly #scratches: SubjectCounts[] = [];
  #scratch(windows: number): SubjectCounts {
    return (this.#scratches[windows] ??= { counters: Array.from({ length: windows }, freshCounter), unsynced: false, changes: 0 });
  }
}
