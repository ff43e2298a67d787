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
