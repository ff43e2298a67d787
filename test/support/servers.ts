/**
 * In-process servers for the HTTP tests: the app built by buildApp on the engine under test (a real
 * SQLite file in a fresh temporary directory, or a PostgreSQL database of its own), listening on a
 * random port, with an injected clock; and the requests and checks those tests share. Every test
 * builds its own server and closes it (or gives it an owner that does).
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppConfig } from '../../src/app.ts';
import { createKey } from '../../src/cli/keys.ts';
import { loadConfig } from '../../src/config.ts';
import { hashKey, type Environment } from '../../src/domain/api-key.ts';
import { STANDARD_PLAN_LIMITS, type Plan } from '../../src/domain/plans.ts';
import { createLogger } from '../../src/logger.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import type { Store } from '../../src/storage/store.ts';
import { createTestDatabase, ENGINE, limiterForEngine, openTestPostgresStore } from './engines.ts';
import { FakeClock } from './fake-clock.ts';

export { FakeClock };
import { atEnd, tempDir, undoAll, type Owner, type Step } from './temp.ts';

export interface TestServer {
  url: string;
  app: FastifyInstance;
  store: Store;
  clock: FakeClock;
  dir: string;
  /** DATABASE_URL of this server's database, for a second instance or the CLI. */
  databaseUrl: string;
  /** Creates a key the way `petstore keys create` does and returns the secret. */
  key(plan?: 'free' | 'pro' | 'business' | 'enterprise', limits?: { rpm: number; rpd: number }): Promise<string>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  /** Share another test server's database file (a second instance), instead of a fresh one. */
  databaseOf?: TestServer;
  /** Receives every JSON log line. */
  onLog?: (line: string) => void;
  /** Closes the server when this test or suite ends, if the test has not closed it. */
  owner?: Owner;
}

/**
 * The app on the engine under test, listening on a random port of 127.0.0.1. Whatever it was given
 * is undone by close(), each part even when another fails, and also when the start itself fails;
 * with `options.owner`, close() also runs when that test or suite ends (closing twice is harmless).
 */
export async function startTestServer(overrides: Partial<AppConfig> = {}, options: TestServerOptions = {}): Promise<TestServer> {
  const undo: Step[] = [];
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= undoAll(undo));
  if (options.owner) atEnd(options.owner, close);
  try {
    const shared = options.databaseOf;
    let dir: string;
    let store: Store;
    let databaseUrl: string;
    if (shared) {
      dir = shared.dir;
      databaseUrl = shared.databaseUrl;
      store =
        ENGINE === 'sqlite'
          ? openSqliteStore({ path: join(dir, 'petstore.db'), synchronous: 'normal' })
          : await openTestPostgresStore(databaseUrl);
    } else {
      dir = tempDir();
      undo.push(() => rmSync(dir, { recursive: true, force: true, maxRetries: 3 }));
      if (ENGINE === 'sqlite') {
        const path = join(dir, 'petstore.db');
        databaseUrl = `sqlite:${path}`;
        store = openSqliteStore({ path, synchronous: 'normal' });
      } else {
        const database = await createTestDatabase();
        undo.push(() => database.drop());
        databaseUrl = database.url;
        store = await openTestPostgresStore(databaseUrl);
      }
    }
    undo.push(() => store.close().catch(() => undefined)); // a test may have closed it already
    const clock = new FakeClock();
    const { limiter, cleanup } = await limiterForEngine(clock);
    undo.push(cleanup);
    undo.push(() => limiter.close());
    // The defaults of a server started with no environment, quiet unless a test asks for the log.
    const config: AppConfig = {
      ...loadConfig({}),
      logLevel: 'silent',
      ...overrides,
    };
    const logger = options.onLog ? createLogger(config.logLevel, { write: (line: string) => options.onLog!(line) }) : undefined;
    const app = await buildApp(config, { store, limiter, clock, logger });
    undo.push(() => app.close());
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    return {
      url: `http://127.0.0.1:${address.port}`,
      app,
      store,
      clock,
      dir,
      databaseUrl,
      async key(plan = 'free', limits) {
        const env: Environment = config.environment;
        const created = await createKey(store, env, {
          plan,
          rpm: limits ? String(limits.rpm) : undefined,
          rpd: limits ? String(limits.rpd) : undefined,
        });
        return created.key;
      },
      close,
    };
  } catch (err) {
    await close().catch(() => undefined); // the start's own failure is the one to report
    throw err;
  }
}

/**
 * A key as releases before key tags issued it: the prefix and 256 random bits, no tag, stored untagged. An
 * instance started after it was stored knows it exists (Store.untaggedKeyHashes); one started before does not.
 */
export async function createUntaggedKey(
  store: Store,
  environment: Environment = 'production',
  plan: Exclude<Plan, 'enterprise'> = 'free',
): Promise<string> {
  const key = (environment === 'production' ? 'pet_live_' : 'pet_test_') + randomBytes(32).toString('base64url');
  await store.createKey({
    id: 'key_' + randomBytes(8).toString('hex'),
    hash: hashKey(key),
    prefix: key.slice(0, 15),
    environment,
    plan,
    ...STANDARD_PLAN_LIMITS[plan],
    label: null,
    subjectId: null,
    tagged: false,
  });
  return key;
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

/**
 * The schema validator's (Ajv's) own messages, which name its keywords ("must NOT have fewer than 1
 * characters", "must match pattern" and the expression, "must be >= 1", "must be string"): a client is
 * told its problems in the service's words instead.
 */
export const VALIDATOR_WORDING =
  /must NOT|must match|must be (?:string|integer|number|object|array|boolean)\b|must be [<>]|must be equal to|must be multiple of|must have (?:required )?propert|must contain/;

/** Asserts the spec's Error shape, worded by the service (never by its schema validator), and returns the body. */
export function errorOf(res: { status: number; headers: Headers; json: any }, status: number, code: string) {
  if (res.status !== status) throw new Error(`expected ${status} ${code}, got ${res.status}: ${JSON.stringify(res.json)}`);
  if (!res.headers.get('content-type')?.startsWith('application/json')) throw new Error('error without JSON content type');
  const body = res.json;
  if (!body || body.code !== code || body.status !== status || typeof body.message !== 'string' || !body.message) {
    throw new Error(`bad error body: ${JSON.stringify(body)}`);
  }
  const words = [body.message, ...((body.details ?? []) as { problem: string }[]).map((d) => d.problem)];
  if (words.some((w) => VALIDATOR_WORDING.test(w))) throw new Error(`the schema validator's own wording: ${JSON.stringify(body)}`);
  return body;
}

/** How many pets the server's store holds, read from the store itself rather than through the API. */
export async function storedCount(server: TestServer): Promise<number> {
  return (await server.store.listPets({ status: undefined, afterId: undefined, limit: 1_000_000 })).length;
}
