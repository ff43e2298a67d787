/**
 * What `petstore serve` says and does as it starts, as an operator sees it: the start line and what
 * it names, `GET /` leading to the docs page, and the dependencies checked before listening. A
 * PostgreSQL that cannot be reached stops the start with one line naming DATABASE_URL; a Redis that
 * cannot be reached is reported naming REDIS_URL while the server serves with in-memory limits; a
 * SQLite file in a folder that does not exist is refused, except the default location's. Passwords
 * in either URL are never printed. Real processes throughout.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createTestDatabase, newKeyPrefix, REDIS_URL, requirePostgres } from '../support/engines.ts';
import {
  CLI,
  cliEnv,
  explain,
  keysCreate,
  runCli,
  startServerProcess,
  stopServer,
  type CliResult,
  type ServerProcess,
} from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

interface StartLine {
  level: number;
  msg: string;
  version: string;
  environment: string;
  storage: { engine: string; path?: string; target?: string };
  limiter: { engine: string; target?: string };
  address: string;
  docs: string;
}

function logLines(server: ServerProcess): Record<string, unknown>[] {
  return server
    .stdout()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The one line after listening that names the environment, storage, limiter, address and docs. */
function startLine(server: ServerProcess): StartLine {
  const lines = logLines(server).filter((l) => 'storage' in l && 'docs' in l);
  assert.equal(lines.length, 1, server.output());
  return lines[0] as unknown as StartLine;
}

async function stop(server: ServerProcess): Promise<void> {
  if (server.child.exitCode === null) server.child.kill('SIGTERM');
  await server.exited;
}

/** One line on stderr, exit status 1, nothing on stdout. */
function assertOneLineRefusal(r: CliResult, context: string): string {
  assert.equal(r.code, 1, context);
  assert.equal(r.stdout, '', context);
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `one line on stderr: ${context}`);
  return lines[0]!;
}

describe('the start line and GET /', () => {
  test('the start line names the environment, the SQLite file, the in-memory limiter, the address and the docs page', async (t) => {
    const dir = tempDir(t);
    const dbPath = join(dir, 'petstore.db');
    const server = await startServerProcess({ DATABASE_URL: `sqlite:${dbPath}`, PETSTORE_ENV: 'staging' }, { owner: t });
    const line = startLine(server);
    assert.equal(line.level, 30, 'info');
    assert.equal(line.environment, 'staging');
    assert.deepEqual(line.storage, { engine: 'sqlite', path: dbPath });
    assert.deepEqual(line.limiter, { engine: 'memory' });
    assert.equal(line.address, server.url);
    assert.equal(line.docs, `${server.url}/docs`);
    for (const part of ['staging', server.url, dbPath, 'memory', `${server.url}/docs`]) assert.ok(line.msg.includes(part), line.msg);
    // The start's last line says what to do next, and which keys this server takes.
    await eventually(async () => String(logLines(server).at(-1)?.msg).startsWith('next:'), 5000, 20);
    const last = logLines(server).at(-1)!;
    assert.match(
      String(last.msg),
      /^next: create a staging key with `\.\/dist\/cli\/main\.js keys create --plan free` in the project's folder/,
    );
    for (const part of ['PETSTORE_ENV=staging', `then open ${server.url}/docs`])
      assert.ok(String(last.msg).includes(part), String(last.msg));
  });

  test('once the environment has a key, the last start line only names the docs page', async (t) => {
    const dir = tempDir(t);
    const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, PETSTORE_ENV: 'staging' };
    await keysCreate(env, '--plan', 'free');
    const server = await startServerProcess(env, { owner: t });
    await eventually(async () => String(logLines(server).at(-1)?.msg).startsWith('next:'), 5000, 20);
    assert.equal(logLines(server).at(-1)!.msg, `next: open ${server.url}/docs`);
  });

  test('a variable that looks like a setting but is not one, from the environment or .env, is named in a warning at start', async (t) => {
    const dir = tempDir(t);
    writeFileSync(join(dir, '.env'), 'PETSTORE_METRICS_PORT=9464\n');
    const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, SHUTDOWN_TIMEOUT: '20000' };
    const server = await startServerProcess(env, { cwd: dir, owner: t });
    const warnings = logLines(server)
      .filter((line) => line.level === 40)
      .map((line) => line.msg);
    assert.deepEqual(warnings, [
      'SHUTDOWN_TIMEOUT is set but is not a setting of this service (did you mean SHUTDOWN_TIMEOUT_MS?): it is ignored',
      'PETSTORE_METRICS_PORT is set but is not a setting of this service (did you mean METRICS_PORT?): it is ignored',
    ]);
  });

  test('a SQLite database the service creates is its owner’s alone under any umask, and so are its -wal, -shm and backups', async (t) => {
    const dir = tempDir(t);
    for (const umask of ['022', '000']) {
      const db = join(dir, `umask-${umask}.db`);
      const env = cliEnv({ DATABASE_URL: `sqlite:${db}` });
      // The command runs under the umask, as a service started by a shell or a unit would.
      const run = (...args: string[]) =>
        spawnSync('sh', ['-c', `umask ${umask} && exec "$0" "$@"`, process.execPath, CLI, ...args], { env, encoding: 'utf8' });
      const created = run('keys', 'create', '--plan', 'free');
      assert.equal(created.status, 0, created.stderr);
      const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8);
      assert.equal(modeOf(db), '600', `umask ${umask}`);
      const server = await startServerProcess({ DATABASE_URL: `sqlite:${db}` }, { owner: t });
      assert.deepEqual([modeOf(`${db}-wal`), modeOf(`${db}-shm`)], ['600', '600'], `umask ${umask}: beside the database while it serves`);
      await stopServer(server);
      const backedUp = run('backup', join(dir, `umask-${umask}-backup.db`));
      assert.equal(backedUp.status, 0, backedUp.stderr);
      assert.equal(modeOf(join(dir, `umask-${umask}-backup.db`)), '600', `umask ${umask}: the backup`);
    }
  });

  test('GET / and HEAD / redirect to /docs with the baseline security headers, without a key', async (t) => {
    const dir = tempDir(t);
    const server = await startServerProcess({ DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` }, { owner: t });
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(`${server.url}/`, { method, redirect: 'manual' });
      assert.equal(res.status, 302, method);
      assert.equal(res.headers.get('location'), '/docs', method);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', method);
      assert.equal(res.headers.get('referrer-policy'), 'no-referrer', method);
      assert.ok(res.headers.get('content-security-policy'), method);
    }
    const followed = await fetch(`${server.url}/`);
    assert.equal(followed.status, 200);
    assert.match(followed.headers.get('content-type') ?? '', /^text\/html/);
  });

  test('on PostgreSQL and Redis the start line names their hosts and the database, never the passwords', async (t) => {
    if (!requirePostgres(t, 'the start line on PostgreSQL and Redis', true)) return;
    const database = await createTestDatabase(t);
    const url = new URL(database.url);
    // PostgreSQL's trust authentication here ignores the password, so one can be shown not to leak.
    url.password = 'hunter2-secret';
    const redis = new URL(REDIS_URL!);
    const env = { DATABASE_URL: url.toString(), REDIS_URL: redis.toString(), REDIS_KEY_PREFIX: newKeyPrefix(t) };
    const server = await startServerProcess(env, { owner: t });
    const line = startLine(server);
    assert.equal(line.environment, 'production');
    assert.deepEqual(line.storage, { engine: 'postgres', target: `PostgreSQL at ${url.host}, database ${url.pathname.slice(1)}` });
    assert.deepEqual(line.limiter, { engine: 'redis', target: `Redis at ${redis.host}` });
    assert.ok(!server.output().includes('hunter2'), server.output());
  });
});

describe('what serve loads', () => {
  // Node's bundled fetch and WebSocket client is memory the server never uses; an ESM import of
  // node:http loads it (src/http/server/node-http.ts). The list of Node's internal modules the process
  // loaded is written as it exits, after it served a few requests.
  test("serve answers requests without loading Node's bundled fetch client", async (t) => {
    const dir = tempDir(t);
    const loaded = join(dir, 'loaded.json');
    const preload = join(dir, 'record-loaded.cjs');
    writeFileSync(
      preload,
      `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(loaded)}, JSON.stringify(process.moduleLoadList)));\n`,
    );
    const server = await startServerProcess(
      { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, NODE_OPTIONS: `--require ${preload}` },
      { owner: t },
    );
    for (const path of ['/v1/pets', '/nowhere', '/healthz']) await (await fetch(`${server.url}${path}`)).arrayBuffer();
    await stop(server);
    const modules = JSON.parse(readFileSync(loaded, 'utf8')) as string[];
    assert.ok(
      modules.some((m) => m.includes('internal/http')),
      'the list names the HTTP modules the server did load',
    );
    assert.deepEqual(
      modules.filter((m) => m.includes('undici')),
      [],
    );
  });
});

describe('dependencies checked at start', () => {
  test('a PostgreSQL that cannot be reached stops serve and keys with one line naming DATABASE_URL, without its password', async () => {
    const url = 'postgres://postgres:secret@127.0.0.1:1/petstore_nowhere';
    await Promise.all(
      [['serve'], ['keys', 'list'], ['keys', 'create', '--plan', 'free']].map(async (args) => {
        const r = await runCli(args, { DATABASE_URL: url, PORT: '0' }, { timeoutMs: 20_000 });
        const line = assertOneLineRefusal(r, explain(args, r));
        assert.match(line, /^petstore: DATABASE_URL names PostgreSQL at 127\.0\.0\.1:1, database petstore_nowhere, which cannot be used: /);
        assert.match(line, /ECONNREFUSED/, line);
        assert.ok(!r.stderr.includes('secret'), r.stderr);
      }),
    );
  });

  test('a Redis that cannot be reached is reported naming REDIS_URL, and the server serves with limits in memory', async (t) => {
    const dir = tempDir(t);
    const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, REDIS_URL: 'redis://:secret@127.0.0.1:1' };
    const key = await keysCreate(env, '--plan', 'free');
    const server = await startServerProcess(env, { owner: t });
    const warning = logLines(server).find((l) => typeof l.msg === 'string' && l.msg.startsWith('REDIS_URL'));
    assert.ok(warning, server.output());
    assert.equal(warning.level, 40, 'a warning');
    assert.match(
      String(warning.msg),
      /^REDIS_URL names Redis at 127\.0\.0\.1:1, which cannot be reached \(.*ECONNREFUSED.*\): serving with rate limits counted in memory/,
    );
    assert.ok(!server.output().includes('secret'), server.output());
    const res = await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-ratelimit-limit'), '60');
  });

  test('a SQLite file in a folder that does not exist is refused naming DATABASE_URL and the folder, which is not created', async (t) => {
    const dir = tempDir(t);
    const missing = join(dir, 'no', 'such');
    await Promise.all(
      [['serve'], ['keys', 'create', '--plan', 'free']].map(async (args) => {
        const r = await runCli(args, { DATABASE_URL: `sqlite:${join(missing, 'petstore.db')}`, PORT: '0' }, { timeoutMs: 20_000 });
        const line = assertOneLineRefusal(r, explain(args, r));
        assert.ok(line.startsWith('petstore: configuration error: DATABASE_URL names a SQLite file in '), line);
        assert.ok(line.includes(missing), line);
      }),
    );
    assert.deepEqual(readdirSync(dir), [], 'nothing was created');
  });

  test('with DATABASE_URL unset, the default ./data folder is created, by keys create and by serve', async (t) => {
    const [forKeys, forServe] = [tempDir(t), tempDir(t)];
    const r = await runCli(['keys', 'create', '--plan', 'free'], {}, { cwd: forKeys });
    assert.equal(r.code, 0, explain(['keys', 'create'], r));
    assert.ok(existsSync(join(forKeys, 'data', 'petstore.db')));
    const server = await startServerProcess({}, { cwd: forServe, owner: t });
    assert.ok(existsSync(join(forServe, 'data', 'petstore.db')));
    assert.equal(startLine(server).storage.path, join(forServe, 'data', 'petstore.db'));
  });
});
