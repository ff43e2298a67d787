/**
 * Test helpers: a real server on a real SQLite file in a fresh temporary directory, listening on a
 * random port, with an injected clock. Every test builds its own and closes it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppConfig, type Clock } from '../src/app.js';
import { createKey } from '../src/cli/keys.js';
import type { Environment } from '../src/domain/api-key.js';
import { MemoryRateLimiter } from '../src/limits/memory.js';
import { openSqliteStore } from '../src/storage/sqlite/store.js';
import type { Store } from '../src/storage/store.js';

export class FakeClock implements Clock {
  constructor(public ms: number = Date.UTC(2026, 10, 22, 12, 0, 0)) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export interface TestServer {
  url: string;
  app: FastifyInstance;
  store: Store;
  clock: FakeClock;
  dir: string;
  /** Creates a key the way `petstore keys create` does and returns the secret. */
  key(plan?: 'free' | 'pro' | 'business' | 'enterprise', limits?: { rpm: number; rpd: number }): Promise<string>;
  close(): Promise<void>;
}

export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'petstore-test-'));
}

export interface TestServerOptions {
  /** Share another test server's database file (a second instance), instead of a fresh one. */
  databaseOf?: TestServer;
  /** Receives every JSON log line. */
  onLog?: (line: string) => void;
}

export async function startTestServer(overrides: Partial<AppConfig> = {}, options: TestServerOptions = {}): Promise<TestServer> {
  const dir = options.databaseOf?.dir ?? tempDir();
  const store = openSqliteStore({ path: join(dir, 'petstore.db'), synchronous: 'normal' });
  const clock = new FakeClock();
  const config: AppConfig = {
    environment: 'production',
    logLevel: 'silent',
    trustProxy: false,
    keyCacheTtlMs: 2000,
    anonymousPerMinute: 60,
    banThreshold: 20,
    banDurationSeconds: 900,
    ...overrides,
  };
  const logStream = options.onLog ? { write: (line: string) => options.onLog!(line) } : undefined;
  const app = await buildApp(config, { store, limiter: new MemoryRateLimiter(), clock, logStream });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    app,
    store,
    clock,
    dir,
    async key(plan = 'free', limits) {
      const env: Environment = config.environment;
      const created = await createKey(store, env, {
        plan,
        rpm: limits ? String(limits.rpm) : undefined,
        rpd: limits ? String(limits.rpd) : undefined,
      });
      return created.key;
    },
    async close() {
      await app.close();
      await store.close();
      if (!options.databaseOf) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** fetch with a bearer key and, for objects, a JSON body. */
export async function call(
  server: TestServer,
  method: string,
  path: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Headers; text: string; json: any }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(server.url + path, { method, headers, body });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** Asserts the spec's Error shape and returns the body. */
export function errorOf(res: { status: number; headers: Headers; json: any }, status: number, code: string) {
  if (res.status !== status) throw new Error(`expected ${status} ${code}, got ${res.status}: ${JSON.stringify(res.json)}`);
  if (!res.headers.get('content-type')?.startsWith('application/json')) throw new Error('error without JSON content type');
  const body = res.json;
  if (!body || body.code !== code || body.status !== status || typeof body.message !== 'string' || !body.message) {
    throw new Error(`bad error body: ${JSON.stringify(body)}`);
  }
  return body;
}
