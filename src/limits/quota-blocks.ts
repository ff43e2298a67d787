/**
 * Pre-admission (docs/rate-limits.md): a busy key's quota taken from Redis a block at a time, spent from memory.
 * Nothing is admitted that Redis did not count first; unspent requests go back through `onUnspent`. A block is
 * at most a thousandth of the smallest limit, so keys on the standard plans never take one.
 */

/** A block is at most this share of its smallest window's limit. */
const BLOCK_SHARE_OF_LIMIT = 1 / 1000;

/** The part of a key's windows a block was taken from: the windows' names and what they held after it. */
export interface BlockWindows {
  /** The names of the windows the block was counted in (WindowLimit.name), one per window. */
  names: readonly string[];
  /** The windows' start instants (epoch ms); a block serves only within the same windows. */
  starts: readonly number[];
  limits: readonly number[];
  /** Each counter's value right after the block was counted. */
  countsAfter: readonly number[];
}

interface Block extends BlockWindows {
  size: number;
  spent: number;
  expiresAtMs: number;
}

/** A subject's current block, and the size its next request to Redis asks for. */
interface Demand {
  block: Block | undefined;
  nextSize: number;
  /** When the subject was last seen; idle subjects are forgotten by sweep(). */
  seenAtMs: number;
}

export interface QuotaBlocksOptions {
  /** The largest block, in requests; 1 turns pre-admission off. */
  maxSize: number;
  /** How long a block may be spent from before its rest is handed back. */
  lifetimeMs: number;
  /** Hands a block's unspent requests back to the counters it was taken from, each while in the block's window. */
  onUnspent: (subject: string, windows: BlockWindows, unspent: number) => void;
}

export class QuotaBlocks {
  readonly #subjects = new Map<string, Demand>();
  readonly #maxSize: number;
  readonly #lifetimeMs: number;
  readonly #onUnspent: QuotaBlocksOptions['onUnspent'];

  constructor(options: QuotaBlocksOptions) {
    this.#maxSize = Math.max(1, Math.floor(options.maxSize));
    this.#lifetimeMs = options.lifetimeMs;
    this.#onUnspent = options.onUnspent;
  }

  /**
   * Spends one request of the subject's block when it has one for these windows: the remaining
   * request count of each window as this instance knows it, or undefined when Redis must be asked.
   */
  spend(subject: string, starts: readonly number[], nowMs: number): number[] | undefined {
    const demand = this.#subjects.get(subject);
    if (demand === undefined) return undefined;
    demand.seenAtMs = nowMs;
    const block = demand.block;
    if (block === undefined) return undefined;
    if (block.expiresAtMs <= nowMs || !sameWindows(block.starts, starts)) {
      this.#retire(subject, demand, block);
      return undefined;
    }
    if (block.spent >= block.size) {
      // Spent within its lifetime: the subject is busier than the block, so the next one doubles.
      demand.block = undefined;
      demand.nextSize = Math.min(this.#maxSize, block.size * 2);
      return undefined;
    }
    block.spent++;
    return remainingOf(block);
  }

  /** The largest block windows with these limits allow: 1 (never a block) for every standard plan. */
  capFor(limits: readonly number[]): number {
    return Math.min(this.#maxSize, Math.floor(Math.min(...limits) * BLOCK_SHARE_OF_LIMIT));
  }

  /** The block the subject's next request to Redis asks for: 1 (a plain decision) unless it is busy. */
  sizeFor(subject: string, cap: number): number {
    return Math.max(1, Math.min(this.#subjects.get(subject)?.nextSize ?? 1, cap));
  }

  /**
   * Records what Redis granted for one admitted request: `size` requests counted, one of them this
   * request's. The rest is spent by the next requests of the subject, within the block's lifetime.
   */
  granted(subject: string, size: number, windows: BlockWindows, nowMs: number): number[] {
    const block: Block = { ...windows, size, spent: 1, expiresAtMs: nowMs + this.#lifetimeMs };
    const demand = this.#subjects.get(subject);
    if (demand === undefined) {
      // A first request starts the subject's record with a plain decision; a second one within the
      // lifetime finds the block spent and asks for two.
      this.#subjects.set(subject, { block, nextSize: 1, seenAtMs: nowMs });
    } else {
      if (demand.block) this.#retire(subject, demand, demand.block);
      demand.block = block;
      demand.seenAtMs = nowMs;
    }
    return remainingOf(block);
  }

  /** Hands back what expired blocks left unspent and forgets subjects idle for two lifetimes. */
  sweep(nowMs: number): void {
    for (const [subject, demand] of this.#subjects) {
      const block = demand.block;
      if (block && block.expiresAtMs <= nowMs) this.#retire(subject, demand, block);
      if (demand.block === undefined && demand.seenAtMs + 2 * this.#lifetimeMs <= nowMs) this.#subjects.delete(subject);
    }
  }

  /** Hands back every block's unspent requests, as the limiter closes. */
  releaseAll(): void {
    for (const [subject, demand] of this.#subjects) if (demand.block) this.#retire(subject, demand, demand.block);
    this.#subjects.clear();
  }

  /**
   * Ends a block: its unspent requests go back to its counters (each counter takes them back only
   * while it is still in the window the block was counted in: a minute that has ended keeps its
   * count, the day it belongs to gets them back), and the next block is sized to what this one served.
   */
  #retire(subject: string, demand: Demand, block: Block): void {
    demand.block = undefined;
    demand.nextSize = Math.max(1, block.spent);
    const unspent = block.size - block.spent;
    if (unspent > 0) this.#onUnspent(subject, block, unspent);
  }
}

function sameWindows(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((start, i) => start === b[i]);
}

/** What each window has left as this instance knows it: its unspent block is still the key's to use. */
function remainingOf(block: Block): number[] {
  return block.limits.map((limit, i) => Math.max(0, limit - block.countsAfter[i]! + (block.size - block.spent)));
}
