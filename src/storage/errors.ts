/**
 * The one storage failure the HTTP layer treats specially: the database cannot be reached right now
 * (connection refused or lost, a timeout, the server shutting down, SQLite busy past its timeout).
 * It becomes a 503 `unavailable` with Retry-After, not a 500.
 */
export class StorageUnavailableError extends Error {
  constructor(cause: unknown) {
    super('storage unavailable', { cause });
  }
}

/**
 * A create that failed this way may still have committed: the database stopped answering after the
 * statement was sent (PostgreSQL; an embedded engine always knows). The client cannot be told whether
 * the pet exists, and an idempotency claim on it must stay until it can be taken over.
 */
export class CreateOutcomeUnknownError extends StorageUnavailableError {}
