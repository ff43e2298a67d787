/**
 * One server process for the benchmark: the real app on a SQLite file, with the in-process limiter
 * or, to measure what the limiter costs, with one that admits everything (and still sends headers).
 * Usage: node bench/server.ts PORT DB_PATH memory|unlimited
 */
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import type { LimitDecision, RateLimiter, WindowLimit } from '../src/limits/limiter.ts';
import { MemoryRateLimiter } from '../src/limits/memory.ts';
import { openSqliteStore } from '../src/storage/sqlite/store.ts';

/** Admits everything; reports full windows so the response headers are the same size. */
class UnlimitedRateLimiter implements RateLimiter {
  now(): number {
    return Date.now();
  }
  consumeNow(_subject: string, limits: readonly WindowLimit[]): LimitDecision {
    const nowMs = Date.now();
    return {
      allowed: true,
      limits,
      nowMs,
      windows: limits.map((w) => ({ ...w, remaining: w.limit, resetAtMs: nowMs - (nowMs % w.windowMs) + w.windowMs })),
    };
  }
  async consume(subject: string, limits: readonly WindowLimit[]): Promise<LimitDecision> {
    return this.consumeNow(subject, limits);
  }
  peek = this.consume;
  async firstMark(): Promise<number> {
    return Date.now();
  }
  async close(): Promise<void> {}
}

const [port, path, limiterName] = process.argv.slice(2);
const store = openSqliteStore({ path: path!, synchronous: 'normal' });
const limiter = limiterName === 'unlimited' ? new UnlimitedRateLimiter() : new MemoryRateLimiter();
const app = await buildApp(
  { ...loadConfig({}), logLevel: 'warn', maxConnectionsPerAddress: 0 }, // the load generator is one address
  { store, limiter },
);
await app.listen({ port: Number(port), host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
console.log('ready');
