/**
 * A pure reference model of the shared limiter's promises (docs/scale-out.md, "What one key can get"): from what
 * happened in a window (which instance admitted what, which decided in memory, which ended, when Redis lost its
 * counts) it gives the most a window may admit and the least it must have admitted before refusing. The model
 * tests drive the real limiters and hold every window to it.
 */

/** What happened in one window of one subject, as the test saw it. */
export class WindowRecord {
  readonly start: number;
  readonly limit: number;
  /** Admissions per incarnation (a limiter instance from its start to its close). */
  readonly admitted = new Map<string, number>();
  /** Incarnations that decided at least once in memory in this window. */
  readonly inMemory = new Set<string>();
  /** Per time Redis lost its counts in this window: the admissions of incarnations ended before then. */
  readonly lostAtEmptying: number[] = [];
  /** Refusals, each with how many the window had admitted then and how many answers had come late by then. */
  readonly refusals: { admittedThen: number; lateThen: number }[] = [];
  /** Decisions whose answer took longer than the limiter's timeout (Redis may have run them late). */
  late = 0;
  /** Whether any fault touched it: Redis slow, paused, emptied or refusing writes, an instance ended. */
  faulted = false;

  constructor(start: number, limit: number) {
    this.start = start;
    this.limit = limit;
  }

  get total(): number {
    let sum = 0;
    for (const n of this.admitted.values()) sum += n;
    return sum;
  }

  /**
   * The most the window may admit: the limit, and once more for each incarnation that decided in memory (it
   * knows others' counts only as Redis last told it, so it may admit up to the limit less those); and each
   * time Redis lost its counts, the limit again (Redis decides afresh for instances that have nothing to
   * raise, before the others' raises are in) and what incarnations already ended had admitted (nobody
   * running can tell it).
   */
  bound(): number {
    return this.limit * (1 + this.inMemory.size + this.lostAtEmptying.length) + this.lostAtEmptying.reduce((a, b) => a + b, 0);
  }

  /**
   * Whether a refusal was earned: without faults only at the limit; after faults, below it by at most the
   * answers that came late (a decision Redis ran after its caller gave up holds a part until the next raise).
   */
  unearnedRefusals(): { admittedThen: number; lateThen: number }[] {
    return this.refusals.filter((r) => r.admittedThen < this.limit - (this.faulted ? r.lateThen : 0));
  }
}

/** The records of a run, by subject, window name and window start. */
export class LimitModel {
  readonly #windows = new Map<string, WindowRecord>();
  readonly #ended = new Map<string, Set<string>>();

  window(subject: string, name: string, start: number, limit: number): WindowRecord {
    const key = `${subject}|${name}|${start}`;
    let record = this.#windows.get(key);
    if (record === undefined) {
      record = new WindowRecord(start, limit);
      this.#windows.set(key, record);
    }
    return record;
  }

  /** Every fault marks the windows live at the time (`starts` by window name). */
  fault(starts: ReadonlyMap<string, number>): void {
    for (const [key, record] of this.#windows) if (starts.get(key.split('|')[1]!) === record.start) record.faulted = true;
  }

  /** An incarnation ended: what it admitted can no longer be told to a Redis that lost it. */
  ended(incarnation: string): void {
    for (const [key, record] of this.#windows) if (record.admitted.has(incarnation)) this.#endedIn(key).add(incarnation);
  }

  /** Redis lost every count: each live window may admit again what its ended incarnations had admitted. */
  emptied(starts: ReadonlyMap<string, number>): void {
    for (const [key, record] of this.#windows) {
      if (starts.get(key.split('|')[1]!) !== record.start) continue;
      const ended = this.#ended.get(key) ?? new Set();
      let lost = 0;
      for (const incarnation of ended) lost += record.admitted.get(incarnation) ?? 0;
      record.lostAtEmptying.push(lost);
      record.faulted = true;
    }
  }

  #endedIn(key: string): Set<string> {
    let set = this.#ended.get(key);
    if (set === undefined) this.#ended.set(key, (set = new Set()));
    return set;
  }

  *entries(): Generator<[string, WindowRecord]> {
    yield* this.#windows;
  }
}
