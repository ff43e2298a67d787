/**
 * Tracing (OpenTelemetry) of the real server process, with an OTLP/HTTP receiver the test owns (the
 * exporter sends JSON, so spans are read without protobuf): a request with a W3C `traceparent`
 * continues the caller's trace (same trace id, the caller's span as parent), its storage work has
 * child spans (SQLite calls; PostgreSQL queries and Redis commands when the test URLs are set),
 * every log line of the request carries the trace id, the spans still queued are sent at shutdown,
 * and neither the key nor its hash leaves in a span. A collector that refuses connections or never
 * answers fails no request and does not hold the shutdown past its bound. With
 * OTEL_EXPORTER_OTLP_ENDPOINT unset, no OpenTelemetry module is loaded at all, by the server or by
 * `keys create`. Also the default process metrics (CPU, event loop, GC) on /metrics, in the server
 * process and in several apps of one process.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import module from 'node:module';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { pathToFileURL } from 'node:url';
import { hashKey } from '../../src/domain/api-key.ts';
import { createTestDatabase, newKeyPrefix, REDIS_URL, requirePostgres } from '../support/engines.ts';
import {
  exitWithin,
  freePort,
  keysCreate,
  runCli,
  startServerProcess,
  unlimitedKey,
  type EnvOverrides,
  type ServerProcess,
} from '../support/processes.ts';
import { call, startTestServer } from '../support/servers.ts';
import { atEnd, tempDir } from '../support/temp.ts';

/** A span as the receiver read it from OTLP/JSON. */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client. */
  kind: number;
  scope: string;
  service: unknown;
  /** The resource's petstore.worker: which worker of the process sent it (docs/workers.md). */
  worker: unknown;
  attributes: Record<string, unknown>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  boolValue?: boolean;
  doubleValue?: number;
}
type OtlpAttributes = { key: string; value: OtlpValue }[];

const valueOf = (value: OtlpValue): unknown => value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue;
const attributesOf = (list: OtlpAttributes = []) => Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]));

interface Receiver {
  url: string;
  spans: ReceivedSpan[];
  /** Every body received, as sent: to look for what must never leave. */
  bodies: string[];
  close(): Promise<void>;
}

/** An OTLP/HTTP collector of traces on a free port of 127.0.0.1: POST /v1/traces with a JSON body. */
async function startReceiver(): Promise<Receiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const server = http.createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/traces' || !request.headers['content-type']?.startsWith('application/json')) {
        response.writeHead(404).end();
        return;
      }
      bodies.push(body);
      for (const resourceSpans of JSON.parse(body).resourceSpans ?? []) {
        const resource = attributesOf(resourceSpans.resource?.attributes);
        const [service, worker] = [resource['service.name'], resource['petstore.worker']];
        for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
          for (const span of scopeSpans.spans ?? []) {
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId ?? '',
              name: span.name,
              kind: span.kind,
              scope: scopeSpans.scope?.name ?? '',
              service,
              worker,
              attributes: attributesOf(span.attributes),
            });
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    bodies,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A collector that accepts connections and reads requests but never answers. */
async function startSilentCollector(): Promise<{ url: string; received(): number; close(): void }> {
  let received = 0;
  const server = http.createServer(() => received++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received: () => received,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

interface Deployment {
  name: 'sqlite' | 'postgres';
  env: EnvOverrides;
}

/** A SQLite file of the test's own, removed when the test ends. */
function sqliteDeployment(t: TestContext): Deployment {
  return { name: 'sqlite', env: { DATABASE_URL: `sqlite:${join(tempDir(t), 'petstore.db')}` } };
}

/** A PostgreSQL database and Redis keys of the test's own, dropped and deleted when the test ends. */
async function postgresDeployment(t: TestContext): Promise<Deployment> {
  const database = await createTestDatabase(t);
  return { name: 'postgres', env: { DATABASE_URL: database.url, REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: newKeyPrefix(t) } };
}

/** SIGTERM, then the exit status within boundMs (failing past it). */
async function stop(server: ServerProcess, boundMs = 10_000): Promise<number | null> {
  server.child.kill('SIGTERM');
  const code = await exitWithin(server, boundMs);
  assert.notEqual(code, 'late', `the server had not exited ${boundMs} ms after SIGTERM`);
  return code as number | null;
}

/** The JSON lines of a server's standard output. */
function logLines(server: ServerProcess): Record<string, unknown>[] {
  return server
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';

/** The span and the chain of its parents within the spans received. */
function ancestry(spans: ReceivedSpan[], span: ReceivedSpan): string[] {
  const chain: string[] = [];
  for (let at: ReceivedSpan | undefined = span; at; at = spans.find((s) => s.spanId === at!.parentSpanId)) chain.push(at.spanId);
  return chain;
}

/**
 * One listPets with a traceparent through a server process sending to a receiver; after SIGTERM
 * (which flushes the queue), the request's spans, checked for what every engine shares.
 */
async function traceOneRequest(t: TestContext, deployment: Deployment, extraEnv: EnvOverrides = {}) {
  const receiver = await startReceiver();
  try {
    const key = await unlimitedKey(deployment.env);
    const metricsPort = await freePort();
    const server = await startServerProcess(
      {
        ...deployment.env,
        ...extraEnv,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        METRICS_PORT: String(metricsPort),
        // Every request looks its key up in storage, so the traced one has that span too.
        KEY_CACHE_TTL_MS: '0',
      },
      { owner: t },
    );
    let metrics: string;
    try {
      const created = await fetch(`${server.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Traced', categoryId: 1 }),
      });
      assert.equal(created.status, 201);
      const res = await fetch(`${server.url}/v1/pets?limit=20`, {
        headers: {
          authorization: `Bearer ${key}`,
          traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`,
          'x-request-id': `traced-${deployment.name}`,
        },
      });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as unknown[]).length, 1);
      metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    } finally {
      assert.equal(await stop(server), 0, server.output());
    }

    const spans = receiver.spans.filter((s) => s.traceId === CALLER_TRACE);
    const described = receiver.spans.map((s) => `${s.scope}: ${s.name} ${s.traceId}/${s.spanId} <- ${s.parentSpanId}`).join('\n');
    const request = spans.find((s) => s.scope === '@fastify/otel' && s.kind === 2);
    assert.ok(request, `a server span in the caller's trace, among:\n${described}`);
    assert.equal(request.name, 'GET /v1/pets');
    assert.equal(request.parentSpanId, CALLER_SPAN, "the caller's span is the parent");
    assert.equal(request.attributes['http.route'], '/v1/pets');
    assert.equal(Number(request.attributes['http.response.status_code']), 200);
    const within = (s: ReceivedSpan) => s !== request && ancestry(spans, s).includes(request.spanId);

    // Every line about the request carries its trace id; lines about the instance carry none.
    const lines = logLines(server);
    const ofRequest = lines.filter((l) => l.requestId === `traced-${deployment.name}`);
    assert.ok(ofRequest.length >= 1, server.stdout());
    for (const line of ofRequest) assert.equal(line.traceId, CALLER_TRACE, JSON.stringify(line));
    for (const line of lines.filter((l) => l.requestId === undefined)) assert.equal(line.traceId, undefined, JSON.stringify(line));

    const everything = receiver.bodies.join('\n');
    assert.ok(!everything.includes(key) && !everything.includes(hashKey(key)), 'neither the key nor its hash is in a span');
    for (const name of [
      'process_cpu_seconds_total',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
      'nodejs_gc_duration_seconds',
    ]) {
      assert.match(metrics, new RegExp(`^${name}`, 'm'), `${name} on the metrics listener`);
    }
    return { spans, request, within, described, server };
  } finally {
    await receiver.close();
  }
}

test("a traceparent is continued on SQLite: the request's span, its SQLite calls within it, the trace id in its log lines", async (t) => {
  const { spans, within, described } = await traceOneRequest(t, sqliteDeployment(t));
  for (const method of ['findKeyByHash', 'listPetsJson']) {
    const span = spans.find((s) => s.name === `sqlite ${method}`);
    assert.ok(span && within(span), `a span for the SQLite call ${method} within the request:\n${described}`);
    assert.equal(span.kind, 3, 'a client span');
    assert.equal(span.attributes['db.system'], 'sqlite');
    assert.equal(span.attributes['db.operation.name'], method);
  }
  assert.ok(
    spans.every((s) => s.service === 'petstore'),
    'service.name defaults to petstore',
  );
});

test('with two workers, each traces on its own: the spans of a request carry the worker whose log lines have it', async (t) => {
  const { spans, request, server, within } = await traceOneRequest(t, sqliteDeployment(t), { WORKERS: '2' });
  const line = logLines(server).find((l) => l.requestId === 'traced-sqlite');
  assert.ok(line && (line.worker === 1 || line.worker === 2), JSON.stringify(line));
  assert.equal(Number(request.worker), line.worker);
  const sqlite = spans.filter(within);
  assert.ok(sqlite.length > 0 && sqlite.every((s) => Number(s.worker) === line.worker), 'its SQLite spans from the same worker');
});

test('on PostgreSQL and Redis, the queries and the limiter’s commands are spans within the request', async (t) => {
  if (!requirePostgres(t, 'tracing of PostgreSQL and Redis', true)) return;
  const { spans, within, described } = await traceOneRequest(t, await postgresDeployment(t), { OTEL_SERVICE_NAME: 'petstore-traced' });
  const queries = spans.filter((s) => s.scope === '@opentelemetry/instrumentation-pg' && s.name.startsWith('pg.query') && within(s));
  for (const name of ['pg.query:key-by-hash', 'pg.query:list-json-all']) {
    assert.ok(
      queries.some((q) => q.name.startsWith(name)),
      `${name} within the request:\n${described}`,
    );
  }
  for (const query of queries) assert.equal(query.kind, 3);
  const commands = spans.filter((s) => s.scope === '@opentelemetry/instrumentation-ioredis' && within(s));
  assert.ok(commands.length >= 1, `the limiter's Redis command:\n${described}`);
  // Commands are recorded by name only: their arguments name keys and client addresses.
  for (const command of commands)
    assert.match(String(command.attributes['db.query.text'] ?? command.attributes['db.statement']), /^[a-z]+$/);
  assert.ok(
    spans.every((s) => s.service === 'petstore-traced'),
    'OTEL_SERVICE_NAME names the service',
  );
  assert.ok(!spans.some((s) => s.name.startsWith('sqlite ')));
});

test('a collector that refuses connections or never answers fails no request, and the shutdown stays within its bound', async (t) => {
  const silent = await startSilentCollector();
  atEnd(t, () => silent.close());
  for (const endpoint of [`http://127.0.0.1:${await freePort()}`, silent.url]) {
    const deployment = sqliteDeployment(t);
    const key = await unlimitedKey(deployment.env);
    const server = await startServerProcess(
      {
        ...deployment.env,
        OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
        SHUTDOWN_DRAIN_MS: '0',
        SHUTDOWN_TIMEOUT_MS: '3000',
        // Key lookups in every request: more spans, so exports start while requests still arrive.
        KEY_CACHE_TTL_MS: '0',
      },
      { owner: t },
    );
    try {
      // Enough spans (a batch is 512) that exports start while requests are still arriving.
      const exportsBefore = silent.received();
      const slowest = { ms: 0 };
      const worker = async () => {
        for (let i = 0; i < 40; i++) {
          const started = performance.now();
          const res = await fetch(`${server.url}/v1/pets?limit=20`, { headers: { authorization: `Bearer ${key}` } });
          assert.equal(res.status, 200);
          await res.arrayBuffer();
          slowest.ms = Math.max(slowest.ms, performance.now() - started);
        }
      };
      await Promise.all(Array.from({ length: 10 }, worker));
      // Generous for a busy machine; an answer waiting on the exporter would take its timeout (10 s).
      assert.ok(slowest.ms < 2000, `the slowest of 400 answers took ${slowest.ms} ms`);
      if (endpoint === silent.url)
        assert.ok(silent.received() > exportsBefore, 'exports were sent, and left unanswered, during the requests');
    } finally {
      const started = Date.now();
      assert.equal(await stop(server, 6000), 0, server.output());
      assert.ok(Date.now() - started < 3500, `exited ${Date.now() - started} ms after SIGTERM, with SHUTDOWN_TIMEOUT_MS 3000`);
    }
  }
});

/**
 * Modules of OpenTelemetry and its hooks: what must not load when tracing is off. Not the API
 * package (@opentelemetry/api), a no-op facade until an SDK registers: prom-client loads it in every
 * process that has metrics, tracing or not.
 */
const TRACING_MODULES = /\/node_modules\/(?:@opentelemetry\/(?!api\/)|@fastify\/otel\/|import-in-the-middle\/|require-in-the-middle\/)/;

/**
 * A module, given to node with --import, that reports on standard error every module resolved whose
 * URL is one of TRACING_MODULES (imports and requires alike: module.registerHooks sees both).
 */
function moduleWatch(dir: string): string {
  const file = join(dir, 'watch-modules.mjs');
  writeFileSync(
    file,
    `import { registerHooks } from 'node:module';
registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context);
    if (${TRACING_MODULES}.test(resolved.url)) process.stderr.write('tracing module loaded: ' + resolved.url + '\\n');
    return resolved;
  },
});
`,
  );
  return pathToFileURL(file).href;
}

test('with OTEL_EXPORTER_OTLP_ENDPOINT unset no OpenTelemetry module is loaded; keys commands never load one', async (t) => {
  if (typeof module.registerHooks !== 'function') {
    console.log(`# SKIPPED: which modules load (module.registerHooks needs Node.js 22.15 or later; this is ${process.version})`);
    t.skip('module.registerHooks not available');
    return;
  }
  const dir = tempDir(t);
  const watch = moduleWatch(dir);
  const env: EnvOverrides = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, NODE_OPTIONS: `--import=${watch}` };
  const loaded = (output: string) => output.split('\n').filter((l) => l.startsWith('tracing module loaded: '));
  const receiver = await startReceiver();
  atEnd(t, () => receiver.close());

  // keys create, even with the variable set.
  const created = await runCli(['keys', 'create', '--plan', 'free'], { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
  assert.equal(created.code, 0, created.stderr);
  assert.deepEqual(loaded(created.stderr), []);
  const key = await keysCreate(env, '--plan', 'free');

  for (const tracing of [false, true]) {
    const server = await startServerProcess(tracing ? { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } : env, { owner: t });
    try {
      const res = await fetch(`${server.url}/v1/pets`, {
        headers: { authorization: `Bearer ${key}`, traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` },
      });
      assert.equal(res.status, 200);
    } finally {
      assert.equal(await stop(server), 0, server.output());
    }
    if (tracing) {
      // The watch sees them when they do load, so its silence above means something.
      assert.ok(loaded(server.stderr()).length > 0, server.stderr());
      assert.ok(receiver.spans.length > 0);
    } else {
      assert.deepEqual(loaded(server.stderr()), []);
      assert.deepEqual(receiver.spans, [], 'no span from the server without the variable');
      assert.ok(!server.stdout().includes('traceId'), 'no trace id in its log');
    }
  }
});

test('default process metrics are served by each app of one process, and closing the apps leaves nothing running', async (t) => {
  const token = 'metrics-token-0123456789';
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  const first = await startTestServer({ metricsToken: token }, { owner: t });
  const second = await startTestServer({ metricsToken: token }, { owner: t });
  try {
    for (const server of [first, second]) {
      const text = (await call(server, 'GET', '/metrics', { key: token })).text;
      for (const name of [
        'process_cpu_seconds_total',
        'process_resident_memory_bytes',
        'nodejs_eventloop_lag_seconds',
        'nodejs_gc_duration_seconds',
      ]) {
        assert.match(text, new RegExp(`^${name}`, 'm'));
      }
      assert.match(text, /^# TYPE petstore_http_requests_total/m, "the app's own metrics beside them");
    }
  } finally {
    await first.close();
    await second.close();
  }
  assert.ok(timers() <= before, `timers still active: ${process.getActiveResourcesInfo().join(', ')}`);
});
