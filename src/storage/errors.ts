/**
 * The database cannot be used right now (unreachable, timed out, shutting down; on SQLite a lock held past
 * SQLITE_LOCK_WAIT_MS, a full disk, read-only storage, an I/O error): a 503 with Retry-After, not a 500.
 */
export interface UnavailableDetails {
  /** What is wrong, in words for the log and for a command's message ("disk full"). */
  reason?: string;
  /** How long a client should wait before trying again. */
  retryAfterSeconds?: number;
  /** The store already logged this cause when it began (once per change of state), so a request need not. */
  logged?: boolean;
}

export class StorageUnavailableError extends Error {
  readonly reason: string | undefined;
  readonly retryAfterSeconds: number;
  readonly logged: boolean;

  constructor(cause: unknown, details: UnavailableDetails = {}) {
    super(details.reason === undefined ? 'storage unavailable' : `storage unavailable: ${details.reason}`, { cause });
    this.reason = details.reason;
    this.retryAfterSeconds = details.retryAfterSeconds ?? 2;
    this.logged = details.logged ?? false;
  }
}

/**
 * A create that failed this way may still have committed: the database stopped answering after the
 * statement was sent (PostgreSQL; an embedded engine always knows). The client cannot be told whether
 * the pet exists, and an idempotency claim on it must stay until it can be taken over.
 */
export class CreateOutcomeUnknownError extends StorageUnavailableError {}
