/** Connections one server's PostgreSQL pool opens at most; a process of several workers divides them (docs/workers.md). */
export const POSTGRES_POOL_SIZE = 10;
