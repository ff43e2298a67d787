/**
 * Whether the latest write succeeded, and the one log line each time that changes: "storage writes
 * failing: disk full" when writes start failing (or fail for another cause), "storage writes
 * recovered" at the first success after. Requests answered 503 in between log nothing of their own.
 */
export interface WriteLog {
  info(message: string): void;
  warn(message: string): void;
}

export class WriteHealth {
  #failing: string | undefined;
  readonly #log: WriteLog | undefined;

  constructor(log: WriteLog | undefined) {
    this.#log = log;
  }

  /** Why the latest write failed; undefined while it succeeded. */
  get failing(): string | undefined {
    return this.#failing;
  }

  /** Whether state changes reach a log (a server's store), so requests need not repeat them. */
  get logs(): boolean {
    return this.#log !== undefined;
  }

  failed(reason: string): void {
    if (reason === this.#failing) return;
    this.#failing = reason;
    this.#log?.warn(`storage writes failing: ${reason}`);
  }

  succeeded(): void {
    if (this.#failing === undefined) return;
    this.#failing = undefined;
    this.#log?.info('storage writes recovered');
  }
}
