/**
 * With Redis, the process is one instance toward it (docs/workers.md): the supervisor holds the one Redis limiter,
 * with its one fallback and its one clock, and decides for every worker over a message port of the worker's own.
 * A worker's requests wait one message there and back on top of Redis's round trip; the decisions, the blocks of
 * quota and the counts raised after an outage are then the process's, as one thread's are.
 */
import type { MessagePort } from 'node:worker_threads';
import type { LimitDecision, RateLimiter, WindowLimit } from '../limits/limiter.ts';
import { LimiterFullError } from '../limits/subject-records.ts';

/** A worker's question. */
export type LimiterRequest =
  | { id: number; op: 'consume' | 'peek'; subject: string; limits: readonly WindowLimit[] }
  | { id: number; op: 'mark'; subject: string; untilMs: number };

/** The answer: a decision, a mark's moment, or why there is none (`full`: the fallback's table has no room). */
export type LimiterAnswer =
  { id: number; decision: LimitDecision } | { id: number; mark: number } | { id: number; failed: 'full' | 'other'; message: string };

/** Interned limits arrays: the limiter keeps what it makes of one array (a block's cap) by the array itself. */
const MAX_INTERNED = 10_000;

/** Answers one worker's questions on `port` with the process's limiter, until the port closes. */
export function serveLimiter(port: MessagePort, limiter: RateLimiter, interned: Map<string, readonly WindowLimit[]>): void {
  const limitsOf = (limits: readonly WindowLimit[]) => {
    const key = JSON.stringify(limits);
    let known = interned.get(key);
    if (known === undefined) {
      if (interned.size >= MAX_INTERNED) interned.clear();
      interned.set(key, (known = limits));
    }
    return known;
  };
  port.on('message', (request: LimiterRequest) => {
    const asked =
      request.op === 'mark'
        ? limiter.firstMark(request.subject, request.untilMs).then((mark): LimiterAnswer => ({ id: request.id, mark }))
        : (request.op === 'consume' ? limiter.consume : limiter.peek)
            .call(limiter, request.subject, limitsOf(request.limits))
            .then((decision): LimiterAnswer => ({ id: request.id, decision: { ...decision, limits: [] } }));
    void asked
      .catch((err: unknown): LimiterAnswer => ({
        id: request.id,
        failed: err instanceof LimiterFullError ? 'full' : 'other',
        message: (err as Error).message,
      }))
      .then((answer) => port.postMessage(answer));
  });
}
