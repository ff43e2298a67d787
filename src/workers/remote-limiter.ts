/**
 * A worker's limiter when the process decides with Redis (limiter-owner.ts): each question goes to the supervisor,
 * which holds the process's one Redis limiter. Its clock is the owner's: Redis's, carried forward by the monotonic
 * clock, which every thread of a process reads alike.
 */
import type { MessagePort } from 'node:worker_threads';
import type { LimitDecision, RateLimiter, WindowLimit } from '../limits/limiter.ts';
import { LimiterFullError } from '../limits/subject-records.ts';
import type { LimiterAnswer, LimiterRequest } from './limiter-owner.ts';

/**
 * Redis's clock as the owner last read it, as an offset from performance.now() (NaN until Redis first answered): one
 * float64 the owner writes and every worker reads, so a worker's now() is the owner's to the millisecond.
 */
export class SharedLimiterClock {
  readonly buffer: SharedArrayBuffer;
  readonly #offset: Float64Array;

  /** The clock over a buffer `create` made (in a worker, the one it was handed). */
  constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    this.#offset = new Float64Array(buffer);
  }

  /** A clock no reply has set yet: the system's until then. */
  static create(): SharedLimiterClock {
    const clock = new SharedLimiterClock(new SharedArrayBuffer(8));
    clock.set(Number.NaN);
    return clock;
  }

  set(offsetMs: number): void {
    this.#offset[0] = offsetMs;
  }

  now(): number {
    const offset = this.#offset[0]!;
    return Number.isNaN(offset) ? Date.now() : Math.floor(offset + performance.now());
  }
}

export class RemoteLimiter implements RateLimiter {
  readonly #port: MessagePort;
  readonly #clock: SharedLimiterClock;
  readonly #waiting = new Map<number, { resolve(answer: LimiterAnswer): void }>();
  #next = 1;

  constructor(port: MessagePort, clock: SharedLimiterClock) {
    this.#port = port;
    this.#clock = clock;
    port.on('message', (answer: LimiterAnswer) => {
      const waiting = this.#waiting.get(answer.id);
      this.#waiting.delete(answer.id);
      waiting?.resolve(answer);
    });
    // The port keeps no worker alive: its server's listener does.
    port.unref();
  }

  now(): number {
    return this.#clock.now();
  }

  async consume(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision> {
    return this.#decision(await this.#ask({ id: 0, op: 'consume', subject, limits }), limits);
  }

  /** Never at once: only the owner decides. */
  consumeNow(): undefined {
    return undefined;
  }

  async peek(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision> {
    return this.#decision(await this.#ask({ id: 0, op: 'peek', subject, limits }), limits);
  }

  async firstMark(subject: string, untilMs: number): Promise<number> {
    const answer = this.#settled(await this.#ask({ id: 0, op: 'mark', subject, untilMs }));
    return (answer as { mark: number }).mark;
  }

  /** The owner closes the process's limiter once every worker has ended. */
  async close(): Promise<void> {}

  #ask(request: LimiterRequest): Promise<LimiterAnswer> {
    const id = this.#next++;
    return new Promise((resolve) => {
      this.#waiting.set(id, { resolve });
      this.#port.postMessage({ ...request, id });
    });
  }

  #settled(answer: LimiterAnswer): LimiterAnswer {
    if (!('failed' in answer)) return answer;
    if (answer.failed === 'full') throw new LimiterFullError();
    throw new Error(answer.message);
  }

  /** The decision, on the caller's own limits array (the same for every decision on them, as LimitDecision says). */
  #decision(answer: LimiterAnswer, limits: readonly WindowLimit[]): LimitDecision {
    return { ...(this.#settled(answer) as { decision: LimitDecision }).decision, limits };
  }
}
