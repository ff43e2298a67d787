/**
 * The `petstore` command as an operator runs it: every test starts the CLI from the TypeScript source
 * (node src/cli/main.ts ...) as a child process, on a SQLite file in its own temporary
 * directory, so nothing depends on a build.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import {
  CLI,
  explain,
  exitWithin,
  freePort,
  keysCreateJson,
  lastLine,
  runCli,
  startServerCommand,
  startServerProcess,
  type CliResult,
  type CreatedKey,
  type EnvOverrides,
} from '../support/processes.ts';
import { atEnd, tempDir } from '../support/temp.ts';

interface Sandbox {
  dir: string;
  dbPath: string;
  /** The child's environment on top of cliEnv's (which removes every configuration variable): this sandbox's DATABASE_URL. */
  env(extra?: EnvOverrides): EnvOverrides;
}

function sandbox(t: TestContext): Sandbox {
  const dir = tempDir(t);
  const dbPath = join(dir, 'petstore.db');
  return {
    dir,
    dbPath,
    env(extra = {}) {
      return { DATABASE_URL: `sqlite:${dbPath}`, ...extra };
    },
  };
}

/** Runs a test body with a fresh sandbox, whose directory goes when the test ends. */
async function inSandbox(t: TestContext, body: (box: Sandbox) => Promise<void>): Promise<void> {
  await body(sandbox(t));
}

async function ok(args: string[], env: EnvOverrides): Promise<CliResult> {
  const r = await runCli(args, env);
  assert.equal(r.code, 0, explain(args, r));
  return r;
}

/**
 * Asserts a refusal in one line on stderr, nothing on stdout and the exit status: 1 (the default)
 * for a command the state or configuration refuses, 2 for a wrong command line. Returns stderr.
 */
async function fails(args: string[], env: EnvOverrides, message: RegExp, code: 1 | 2 = 1): Promise<string> {
  const r = await runCli(args, env);
  assert.equal(r.code, code, explain(args, r));
  assert.match(r.stderr, message, explain(args, r));
  assert.equal(r.stdout, '', explain(args, r));
  assert.equal(r.stderr.trimEnd().split('\n').length, 1, `one line: ${explain(args, r)}`);
  assert.doesNotMatch(r.stderr, /Usage:/, explain(args, r));
  return r.stderr;
}

/** A wrong command line: exit status 2, one line. */
const misused = (args: string[], env: EnvOverrides, message: RegExp) => fails(args, env, message, 2);

/** What `petstore keys list --json` prints per key: the created key's fields but the key itself, and its state. */
interface ListedKey extends Omit<CreatedKey, 'key'> {
  createdAt: string;
  revokedAt: string | null;
  bannedUntil: string | null;
  expiresAt: string | null;
  subjectId: string;
}

async function listJson(env: EnvOverrides): Promise<ListedKey[]> {
  const r = await ok(['keys', 'list', '--json'], env);
  const rows: unknown = JSON.parse(lastLine(r.stdout));
  assert.ok(Array.isArray(rows), `keys list --json printed ${r.stdout}`);
  return rows as ListedKey[];
}

describe('keys create', () => {
  test('keys create --plan free prints the key alone on the last line: pet_live_ in production, pet_test_ in staging', async (t) => {
    await inSandbox(t, async (box) => {
      const [live, staging] = await Promise.all([
        ok(['keys', 'create', '--plan', 'free'], box.env()),
        ok(['keys', 'create', '--plan', 'free'], box.env({ PETSTORE_ENV: 'staging' })),
      ]);
      const liveKey = lastLine(live.stdout);
      // 43 random characters, then the 11 of the key's tag.
      assert.match(liveKey, /^pet_live_[A-Za-z0-9_-]{54}$/, live.stdout);
      assert.equal(live.stderr, '');
      // The lines before it are prose for the operator; the key appears only on the last one.
      assert.equal(live.stdout.split(liveKey).length, 2, 'the key is printed exactly once');

      const testKey = lastLine(staging.stdout);
      assert.match(testKey, /^pet_test_[A-Za-z0-9_-]{54}$/, staging.stdout);
      assert.notEqual(testKey.slice(9), liveKey.slice(9));
    });
  });

  test('keys create --plan pro --label shop --json prints one JSON object with the pro limits on the last line', async (t) => {
    await inSandbox(t, async (box) => {
      const r = await ok(['keys', 'create', '--plan', 'pro', '--label', 'shop', '--json'], box.env());
      assert.equal(r.stdout.trimEnd().split('\n').length, 1, `only the JSON object is printed: ${r.stdout}`);
      const created = JSON.parse(lastLine(r.stdout)) as CreatedKey;
      assert.match(created.id, /^key_[0-9a-f]+$/);
      assert.match(created.key, /^pet_live_/);
      assert.equal(created.plan, 'pro');
      assert.equal(created.environment, 'production');
      assert.equal(created.rpm, 300);
      assert.equal(created.rpd, 10_000);
      assert.equal(created.label, 'shop');
      assert.ok(created.key.startsWith(created.prefix), 'the prefix is the start of the key');
      assert.ok(created.prefix.length < created.key.length);
    });
  });

  test('keys create --plan enterprise takes --rpm and --rpd; missing, misplaced or senseless limits, unknown and missing plans exit 2', async (t) => {
    await inSandbox(t, async (box) => {
      const created = await keysCreateJson(box.env(), '--plan', 'enterprise', '--rpm', '5000', '--rpd', '200000');
      assert.equal(created.plan, 'enterprise');
      assert.equal(created.rpm, 5000);
      assert.equal(created.rpd, 200_000);

      const env = box.env();
      await Promise.all([
        misused(['keys', 'create', '--plan', 'enterprise', '--json'], env, /--plan enterprise needs --rpm N and --rpd N/),
        misused(['keys', 'create', '--plan', 'pro', '--rpm', '5000', '--json'], env, /--rpm and --rpd apply only to --plan enterprise/),
        misused(
          ['keys', 'create', '--plan', 'platinum', '--json'],
          env,
          /--plan must be free, pro, business or enterprise, got "platinum"/,
        ),
        misused(['keys', 'create', '--label', 'shop', '--json'], env, /--plan is required/),
        misused(['keys', 'create', '--plan', 'enterprise', '--rpm', '0', '--rpd', '10'], env, /--rpm must be a positive integer, got "0"/),
      ]);
      assert.equal((await listJson(env)).length, 1, 'no refused command created a key');
    });
  });
});

describe('keys list', () => {
  test('keys list shows created keys by prefix, as a table and as JSON, and never prints a full key', async (t) => {
    await inSandbox(t, async (box) => {
      const [free, business] = await Promise.all([
        keysCreateJson(box.env(), '--plan', 'free', '--label', 'first'),
        keysCreateJson(box.env(), '--plan', 'business'),
      ]);

      const [table, json] = await Promise.all([ok(['keys', 'list', '--wide'], box.env()), ok(['keys', 'list', '--json'], box.env())]);
      const lines = table.stdout.trimEnd().split('\n');
      assert.match(lines[0]!, /^ID\s+PREFIX\s+ENV\s+PLAN\s+RPM\s+RPD\s+STATE\s+CREATED\s+EXPIRES\s+LABEL$/);
      assert.equal(lines.length, 3, table.stdout);
      const freeLine = lines.find((l) => l.startsWith(free.id));
      const businessLine = lines.find((l) => l.startsWith(business.id));
      assert.ok(freeLine, table.stdout);
      assert.ok(businessLine, table.stdout);
      assert.match(freeLine, new RegExp(`${free.prefix}…\\s+production\\s+free\\s+60\\s+1000\\s+active\\s+\\S+\\s+never\\s+first$`));
      assert.match(businessLine, new RegExp(`${business.prefix}…\\s+production\\s+business\\s+1000\\s+100000\\s+active`));

      const rows = JSON.parse(lastLine(json.stdout)) as ListedKey[];
      assert.equal(rows.length, 2);
      for (const [row, created] of [
        [rows.find((r) => r.id === free.id), free],
        [rows.find((r) => r.id === business.id), business],
      ] as const) {
        assert.ok(row, json.stdout);
        assert.equal(row.plan, created.plan);
        assert.equal(row.prefix, created.prefix);
        assert.equal(row.revokedAt, null);
        assert.equal(row.bannedUntil, null);
        assert.ok('revokedAt' in row && 'bannedUntil' in row);
        assert.ok(!Number.isNaN(Date.parse(row.createdAt)));
        assert.ok(!('key' in row), 'list has no key field');
        assert.ok(!('hash' in row), 'list has no hash field');
      }

      for (const output of [table.stdout, json.stdout]) {
        for (const created of [free, business]) {
          assert.ok(!output.includes(created.key), 'the full key appeared in keys list');
          // Not even a longer piece of the secret than the prefix.
          assert.ok(!output.includes(created.key.slice(0, created.prefix.length + 1)), 'more than the prefix appeared');
          assert.ok(output.includes(created.prefix));
        }
      }
    });
  });

  test('keys list shows an expired key as expired, and keys rotate refuses it', async (t) => {
    await inSandbox(t, async (box) => {
      const key = await keysCreateJson(box.env(), '--plan', 'free');
      await ok(['keys', 'expire', key.id, '--at', '2020-01-01T00:00:00Z', '--force'], box.env());
      const table = (await ok(['keys', 'list', '--wide'], box.env())).stdout;
      const row = table.split('\n').find((line) => line.startsWith(key.id))!;
      assert.match(row, /expired 2020-01-01T00:00:00.000Z/);
      assert.doesNotMatch(row, /active/);
      const short = (await ok(['keys', 'list'], box.env())).stdout.split('\n').find((line) => line.startsWith(key.id))!;
      assert.match(short, /\sexpired(\s|$)/);
      const refusal = new RegExp(`key ${key.id} expired at 2020-01-01T00:00:00.000Z; create a new key instead`);
      await fails(['keys', 'rotate', key.id], box.env(), refusal);
      assert.equal((await listJson(box.env())).length, 1, 'no replacement was created');
    });
  });
});

describe('keys revoke, rotate, plan and expire', () => {
  test('keys revoke ID revokes once; revoking again or an unknown ID exits 1 with one line and no usage', async (t) => {
    await inSandbox(t, async (box) => {
      const doomed = await keysCreateJson(box.env(), '--plan', 'free');

      const revoked = await ok(['keys', 'revoke', doomed.id], box.env());
      assert.match(revoked.stdout, new RegExp(`Revoked ${doomed.id}`));

      const rows = await listJson(box.env());
      const row = rows.find((r) => r.id === doomed.id);
      assert.ok(row);
      assert.ok(row.revokedAt !== null && !Number.isNaN(Date.parse(row.revokedAt)), `revokedAt: ${row.revokedAt}`);
      assert.equal(row.bannedUntil, null);

      await Promise.all([
        fails(['keys', 'revoke', doomed.id], box.env(), new RegExp(`no active key with ID ${doomed.id} \\(petstore keys list shows`)),
        fails(['keys', 'revoke', 'key_0000000000000000'], box.env(), /no active key with ID key_0000000000000000/),
      ]);
    });
  });

  test('a command given the key itself instead of its ID says so, and shows no more of the key than keys list does', async (t) => {
    await inSandbox(t, async (box) => {
      const created = await keysCreateJson(box.env(), '--plan', 'free');
      for (const args of [
        ['keys', 'revoke', created.key],
        ['keys', 'unban', created.key],
        ['keys', 'rotate', created.key],
        ['keys', 'plan', created.key, '--plan', 'pro'],
        ['keys', 'expire', created.key, '--never'],
      ]) {
        const said = await misused(
          args,
          box.env(),
          /is an API key, not a key's ID: commands take the ID \(key_ and 16 hexadecimal digits\)\. petstore keys list shows/,
        );
        assert.ok(said.includes(`${created.key.slice(0, 15)}…`), said);
        assert.ok(!said.includes(created.key.slice(0, 16)), `no more of the key than its listed prefix: ${said}`);
      }
      assert.equal((await listJson(box.env()))[0]!.revokedAt, null, 'nothing changed');
    });
  });

  test('keys rotate issues a replacement with the same plan and sets the old key to expire after the grace', async (t) => {
    await inSandbox(t, async (box) => {
      const old = await keysCreateJson(box.env(), '--plan', 'pro', '--label', 'shop');
      const before = Date.now();
      const rotated = await ok(['keys', 'rotate', old.id, '--grace', '2h', '--json'], box.env());
      const fresh = JSON.parse(lastLine(rotated.stdout));
      assert.match(fresh.key, /^pet_live_/);
      assert.deepEqual([fresh.plan, fresh.rpm, fresh.label, fresh.replaces], ['pro', old.rpm, 'shop', old.id]);
      const expiry = Date.parse(fresh.replacedExpiresAt);
      assert.ok(expiry >= before + 2 * 3_600_000 && expiry <= Date.now() + 2 * 3_600_000);
      const rows = await listJson(box.env());
      assert.equal(rows.find((r) => r.id === old.id)!.expiresAt, fresh.replacedExpiresAt);
      assert.equal(rows.find((r) => r.id === fresh.id)!.expiresAt, null);
      await Promise.all([
        misused(['keys', 'rotate', old.id, '--grace', '3 hours'], box.env(), /--grace must be a duration/),
        misused(['keys', 'rotate', old.id, '--grace', '0s'], box.env(), /--grace must be a duration .* from 1s to 365d, got "0s"/),
        misused(['keys', 'rotate', old.id, '--grace', '-1h'], box.env(), /--grace must be a duration .*, got "-1h"/),
        fails(['keys', 'rotate', 'key_0000000000000000'], box.env(), /no key with ID key_0000000000000000/),
      ]);
    });
  });

  test('keys plan changes plan and limits; keys expire sets and clears a date; bad input exits 2, an unknown key 1', async (t) => {
    await inSandbox(t, async (box) => {
      const key = await keysCreateJson(box.env(), '--plan', 'free');
      const planArgs = ['keys', 'plan', key.id, '--plan', 'enterprise', '--rpm', '5000', '--rpd', '90000', '--json'];
      const changed = JSON.parse((await ok(planArgs, box.env())).stdout);
      assert.deepEqual([changed.plan, changed.rpm, changed.rpd], ['enterprise', 5000, 90000]);
      const dated = await ok(['keys', 'expire', key.id, '--at', '2030-01-31T00:00:00Z'], box.env());
      assert.match(dated.stdout, /expires at 2030-01-31T00:00:00.000Z/);
      assert.match((await ok(['keys', 'list', '--wide'], box.env())).stdout, /2030-01-31T00:00:00.000Z/);
      await ok(['keys', 'expire', key.id, '--never'], box.env());
      assert.equal((await listJson(box.env())).find((r) => r.id === key.id)!.expiresAt, null);
      await Promise.all([
        misused(['keys', 'plan', key.id, '--plan', 'gold'], box.env(), /--plan must be/),
        misused(
          ['keys', 'plan', key.id, '--plan', 'enterprise', '--rpm', '100', '--rpd', '50'],
          box.env(),
          /--rpd \(50\) must be at least --rpm \(100\)/,
        ),
        misused(['keys', 'expire', key.id, '--at', 'tomorrow'], box.env(), /--at must be an ISO 8601 timestamp/),
        misused(['keys', 'expire', key.id], box.env(), /exactly one of --at TIMESTAMP and --never/),
        fails(['keys', 'plan', 'key_0000000000000000', '--plan', 'pro'], box.env(), /no key with ID/),
      ]);
    });
  });
});

describe('keys unban', () => {
  function insertBan(dbPath: string, keyId: string, bannedUntilMs: number): void {
    const db = new DatabaseSync(dbPath);
    try {
      db.exec('PRAGMA busy_timeout = 5000');
      db.prepare('INSERT INTO bans (key_id, banned_until, created_at) VALUES (?, ?, ?)').run(keyId, bannedUntilMs, Date.now());
    } finally {
      db.close();
    }
  }

  function banRows(dbPath: string): number {
    const db = new DatabaseSync(dbPath, { readOnly: true });
    try {
      return db.prepare('SELECT count(*) AS n FROM bans').get()!.n as number;
    } finally {
      db.close();
    }
  }

  test('keys unban ID exits 1 for a key that is not banned, and lifts a ban that is in force', async (t) => {
    await inSandbox(t, async (box) => {
      const key = await keysCreateJson(box.env(), '--plan', 'free');
      await fails(['keys', 'unban', key.id], box.env(), new RegExp(`key ${key.id} is not banned`));

      const until = Date.now() + 15 * 60_000;
      insertBan(box.dbPath, key.id, until);

      const banned = await listJson(box.env());
      assert.equal(banned.find((r) => r.id === key.id)?.bannedUntil, new Date(until).toISOString());
      assert.equal(banned.find((r) => r.id === key.id)?.revokedAt, null);

      const lifted = await ok(['keys', 'unban', key.id], box.env());
      assert.match(lifted.stdout, new RegExp(`Lifted the ban on ${key.id}`));
      assert.equal(banRows(box.dbPath), 0, 'the ban row is gone');
    });
  });

  test('a banned key rotated gives a banned key; keys list shows both; keys unban of the new key lifts the ban for both', async (t) => {
    await inSandbox(t, async (box) => {
      const old = await keysCreateJson(box.env(), '--plan', 'free');
      const until = Date.now() + 15 * 60_000;
      insertBan(box.dbPath, old.id, until);

      const rotated = await ok(['keys', 'rotate', old.id, '--grace', '1h'], box.env());
      const freshId = /^Created (key_[0-9a-f]+) to replace /m.exec(rotated.stdout)?.[1];
      assert.ok(freshId, rotated.stdout);
      assert.match(rotated.stdout, /same minute and day limits and share bans/);
      assert.match(rotated.stdout, new RegExp(`${old.id} is banned until ${new Date(until).toISOString()}, so ${freshId} is too`));
      assert.match(lastLine(rotated.stdout), /^pet_live_/, 'the key is still the last line');

      const listed = await listJson(box.env());
      assert.deepEqual(
        [old.id, freshId].map((id) => listed.find((r) => r.id === id)),
        [old.id, freshId].map((id) => ({
          ...listed.find((r) => r.id === id)!,
          bannedUntil: new Date(until).toISOString(),
          subjectId: old.id,
        })),
        'both keys banned, one subject',
      );
      const table = (await ok(['keys', 'list'], box.env())).stdout.split('\n');
      for (const id of [old.id, freshId]) assert.match(table.find((l) => l.startsWith(id)) ?? '', /\sbanned$/);

      const lifted = await ok(['keys', 'unban', freshId], box.env());
      assert.match(lifted.stdout, new RegExp(`Lifted the ban on ${freshId} and on ${old.id}, which shares its limits by rotation`));
      assert.equal(banRows(box.dbPath), 0, 'the ban row is gone');
      assert.deepEqual(
        (await listJson(box.env())).map((r) => r.bannedUntil),
        [null, null],
      );
      await Promise.all([
        fails(['keys', 'unban', old.id], box.env(), new RegExp(`key ${old.id} is not banned`)),
        fails(['keys', 'unban', 'key_0000000000000000'], box.env(), /no key with ID key_0000000000000000/),
      ]);
    });
  });

  test('keys unban ID of a key whose ban has already ended exits 1 (it is not banned)', async (t) => {
    await inSandbox(t, async (box) => {
      const key = await keysCreateJson(box.env(), '--plan', 'free');
      // keys list (and the server) treat a ban row whose end has passed as no ban at all...
      insertBan(box.dbPath, key.id, Date.now() - 60_000);
      // ...so unban should say so, as it does for a key that was never banned.
      await fails(['keys', 'unban', key.id], box.env(), /is not banned/);
    });
  });
});

describe('serve', () => {
  async function get(url: string, key?: string): Promise<{ status: number; body: unknown }> {
    const res = await fetch(url, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    return { status: res.status, body };
  }

  test(
    'petstore serve answers the probes, logs JSON lines, honours CLI key changes at once, and exits 0 on SIGTERM',
    { timeout: 40_000 },
    async (t) => {
      await inSandbox(t, async (box) => {
        const server = await startServerProcess(box.env(), { owner: t });
        try {
          const health = await get(`${server.url}/healthz`);
          assert.equal(health.status, 200);
          assert.deepEqual(health.body, { status: 'ok' });
          const ready = await get(`${server.url}/readyz`);
          assert.equal(ready.status, 200, JSON.stringify(ready.body));
          assert.deepEqual(ready.body, { status: 'ready', storage: 'sqlite' });

          // Without a key: 401.
          assert.equal((await get(`${server.url}/v1/pets`)).status, 401);

          // A key created by the CLI while the server runs works on the very next request.
          const created = await keysCreateJson(box.env(), '--plan', 'pro');
          const first = await get(`${server.url}/v1/pets`, created.key);
          assert.equal(first.status, 200, JSON.stringify(first.body));
          assert.ok(Array.isArray(first.body), JSON.stringify(first.body));

          // A key of the other environment is refused by this production server.
          const staging = await keysCreateJson(box.env({ PETSTORE_ENV: 'staging' }), '--plan', 'free');
          assert.equal((await get(`${server.url}/v1/pets`, staging.key)).status, 401);

          // After keys revoke, the server refuses the key within 5 s (it may serve it from its cache for up to 2 s).
          await ok(['keys', 'revoke', created.id], box.env());
          const revokedAt = Date.now();
          let status = 0;
          while (Date.now() - revokedAt < 5_000) {
            status = (await get(`${server.url}/v1/pets`, created.key)).status;
            if (status === 401) break;
            assert.equal(status, 200, 'until the cache expires the key still works');
            await sleep(250);
          }
          assert.equal(status, 401, 'the revoked key is refused within 5 s');

          const signalledAt = Date.now();
          assert.ok(server.child.kill('SIGTERM'));
          const code = await exitWithin(server, 10_000);
          assert.notEqual(code, 'late', 'the server exited within 10 s of SIGTERM');
          assert.deepEqual([code, server.child.signalCode], [0, null], `exit after ${Date.now() - signalledAt} ms`);

          const lines = server
            .stdout()
            .split('\n')
            .filter((l) => l !== '');
          assert.ok(lines.length > 0, 'the server logged something');
          const entries = lines.map((line) => {
            try {
              return JSON.parse(line) as { level?: unknown; msg?: unknown; time?: unknown; status?: unknown; keyId?: unknown };
            } catch {
              throw new Error(`a log line is not JSON: ${line}`);
            }
          });
          for (const e of entries) {
            assert.equal(typeof e.level, 'number');
            assert.equal(typeof e.msg, 'string');
            assert.equal(typeof e.time, 'number');
          }
          const logged = entries.some((e) => e.msg === 'request' && e.keyId === created.id && e.status === 200);
          assert.ok(logged, 'requests are logged with the key ID');
          assert.ok(
            entries.some((e) => e.msg === 'shutting down'),
            'the shutdown is logged',
          );
          assert.ok(!server.stdout().includes(created.key), 'the key appeared in the log');
          assert.equal(server.stderr(), '', 'nothing on stderr');
        } finally {
          if (server.child.exitCode === null) server.child.kill('SIGKILL');
          await server.exited;
        }
      });
    },
  );
});

describe('serve flags and signals', () => {
  /** Whether anything accepts connections at url now. */
  async function answers(url: string): Promise<boolean> {
    try {
      await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) });
      return true;
    } catch {
      return false;
    }
  }

  test('serve --port and --host override PORT and HOST', { timeout: 30_000 }, async (t) => {
    await inSandbox(t, async (box) => {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      // Values the configuration would refuse: serving at all shows the flags replaced them.
      const env = box.env({ PORT: 'not-a-port', HOST: 'not a host' });
      const server = await startServerCommand(process.execPath, [CLI, 'serve', '--port', String(port), '--host', '127.0.0.1'], env, url, {
        owner: t,
      });
      try {
        assert.equal((await fetch(`${url}/healthz`)).status, 200);
        server.child.kill('SIGTERM');
        assert.equal(await exitWithin(server, 10_000), 0);
      } finally {
        if (server.child.exitCode === null) server.child.kill('SIGKILL');
        await server.exited;
      }
    });
  });

  // docs/cli.md: a supervisor's SIGTERM must reach the server itself. A shell wrapper that `exec`s
  // the command becomes it, so the signal sent to the process the supervisor started is the server's.
  test(
    'started by a shell wrapper that execs it, the server gets the SIGTERM sent to the wrapper, exits 0 and closes its port',
    { timeout: 30_000 },
    async (t) => {
      await inSandbox(t, async (box) => {
        const port = await freePort();
        const url = `http://127.0.0.1:${port}`;
        const wrapper = 'exec "$0" "$1" serve --port "$2"';
        const server = await startServerCommand('/bin/sh', ['-c', wrapper, process.execPath, CLI, String(port)], box.env(), url, {
          owner: t,
        });
        try {
          assert.ok(server.child.kill('SIGTERM'), 'the signal was sent to the pid the wrapper was started as');
          assert.equal(await exitWithin(server, 10_000), 0, server.output());
          assert.equal(await answers(url), false, 'the port is closed');
          assert.match(server.output(), /"msg":"shutting down"/);
        } finally {
          if (server.child.exitCode === null) server.child.kill('SIGKILL');
          await server.exited;
        }
      });
    },
  );
});

describe('configuration', () => {
  const BAD_CONFIGURATIONS: { variable: string; value: string }[] = [
    { variable: 'PORT', value: 'abc' },
    { variable: 'PORT', value: '70000' },
    { variable: 'PETSTORE_ENV', value: 'dev' },
    { variable: 'LOG_LEVEL', value: 'loud' },
    { variable: 'DATABASE_URL', value: 'mysql://x' },
    { variable: 'SQLITE_SYNCHRONOUS', value: 'maybe' },
    { variable: 'TRUST_PROXY', value: 'yes-please' },
    { variable: 'TRUST_PROXY', value: 'true' },
    { variable: 'METRICS_PORT', value: 'abc' },
  ];

  function assertOneConfigLine(r: CliResult, variable: string, context: string): string {
    assert.equal(r.code, 1, context);
    assert.equal(r.stdout, '', context);
    assert.ok(r.stderr.endsWith('\n'), context);
    const lines = r.stderr.slice(0, -1).split('\n');
    assert.equal(lines.length, 1, `exactly one line on stderr: ${context}`);
    assert.match(lines[0]!, /^petstore: configuration error: /, context);
    assert.ok(lines[0]!.includes(variable), `the message names ${variable}: ${context}`);
    return lines[0]!;
  }

  test('each bad configuration value makes serve and keys list exit 1 with one stderr line naming the variable', async (t) => {
    await inSandbox(t, async (box) => {
      // A port that is free, so a serve that wrongly accepted its configuration would not collide with anything
      // (and is killed by runCli's time limit, failing the test).
      const port = String(await freePort());
      const runs = BAD_CONFIGURATIONS.flatMap(({ variable, value }) =>
        [['serve'], ['keys', 'list']].map(async (args) => {
          const env = box.env({ PORT: port, HOST: '127.0.0.1', [variable]: value });
          const r = await runCli(args, env, { timeoutMs: 20_000 });
          const context = `${variable}=${value} petstore ${args.join(' ')}\n${explain(args, r)}`;
          const line = assertOneConfigLine(r, variable, context);
          if (variable !== 'DATABASE_URL') assert.ok(line.includes(value), `the message shows the bad value: ${context}`);
        }),
      );
      await Promise.all(runs);
    });
  });

  test('a SQLite path naming a folder, or on a read-only file system, is refused in words that say what to do', async (t) => {
    await inSandbox(t, async (box) => {
      const folder = join(box.dir, 'data');
      mkdirSync(folder);
      for (const args of [['serve'], ['keys', 'list']]) {
        const said = await fails(args, { DATABASE_URL: `sqlite:${folder}`, PORT: '0' }, /which cannot be opened: it is a folder/);
        assert.equal(
          said,
          `petstore: DATABASE_URL names the SQLite file ${folder}, which cannot be opened: it is a folder: name a file in it, e.g. DATABASE_URL=sqlite:${join(folder, 'petstore.db')}\n`,
        );
      }
      // A read-only file system, as a volume mounted read-only gives (mounting needs root).
      const readOnly = join(box.dir, 'read-only');
      mkdirSync(readOnly);
      const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', readOnly], { encoding: 'utf8' });
      if (mounted.status !== 0) {
        t.diagnostic(`read-only file system not tried: mount refused (${mounted.stderr.trim() || mounted.error?.message})`);
        return;
      }
      atEnd(t, () => void spawnSync('umount', ['-l', readOnly])); // before the folder goes
      for (const args of [['serve'], ['keys', 'list']]) {
        const said = await fails(args, { DATABASE_URL: `sqlite:${join(readOnly, 'petstore.db')}`, PORT: '0' }, /read-only/);
        assert.equal(
          said,
          `petstore: DATABASE_URL names the SQLite file ${join(readOnly, 'petstore.db')}, which cannot be opened: the folder ${readOnly} is on a read-only file system; SQLite writes the database and its -wal and -shm files there: point DATABASE_URL at a writable folder, or mount it read-write\n`,
        );
      }
    });
  });

  test('a TRUST_PROXY address list that is not valid addresses is a configuration error naming TRUST_PROXY', async (t) => {
    await inSandbox(t, async (box) => {
      const port = String(await freePort());
      await Promise.all(
        [['serve'], ['keys', 'list']].map(async (args) => {
          for (const value of ['abc', '10.0.0.0/33', ':::', '1.2.3.4,nope']) {
            const r = await runCli(args, box.env({ PORT: port, HOST: '127.0.0.1', TRUST_PROXY: value }), { timeoutMs: 20_000 });
            assertOneConfigLine(r, 'TRUST_PROXY', `TRUST_PROXY=${value}\n${explain(args, r)}`);
          }
        }),
      );
    });
  });

  test('a malformed postgres DATABASE_URL is reported without its password', async (t) => {
    await inSandbox(t, async (box) => {
      const url = 'postgres://user:secret@host:notaport/db';
      await Promise.all(
        [['serve'], ['keys', 'list']].map(async (args) => {
          const r = await runCli(args, box.env({ DATABASE_URL: url }), { timeoutMs: 20_000 });
          const context = `DATABASE_URL=${url}\n${explain(args, r)}`;
          assertOneConfigLine(r, 'DATABASE_URL', context);
          assert.ok(!r.stderr.includes('secret'), `the password was printed: ${context}`);
          assert.ok(!r.stderr.includes('user:'), `the credentials were printed: ${context}`);
        }),
      );
    });
  });

  test('a .env file in the working directory supplies unset settings; a variable set in the environment wins', async (t) => {
    await inSandbox(t, async (box) => {
      const fromFile = join(box.dir, 'from-dotenv.db');
      writeFileSync(join(box.dir, '.env'), `# local settings\nDATABASE_URL=sqlite:${fromFile}\nPETSTORE_ENV=staging\n`);
      const env = { ...box.env(), DATABASE_URL: undefined };
      const staging = await runCli(['keys', 'create', '--plan', 'free', '--json'], env, { cwd: box.dir });
      assert.equal(staging.code, 0, explain(['keys', 'create'], staging));
      assert.equal(JSON.parse(lastLine(staging.stdout)).environment, 'staging');
      assert.ok(existsSync(fromFile), 'DATABASE_URL came from .env');
      const productionEnv = { ...env, PETSTORE_ENV: 'production' };
      const production = await runCli(['keys', 'create', '--plan', 'free', '--json'], productionEnv, { cwd: box.dir });
      assert.equal(production.code, 0, explain(['keys', 'create'], production));
      assert.equal(JSON.parse(lastLine(production.stdout)).environment, 'production');
    });
  });
});

describe('usage', () => {
  const SUBCOMMANDS = ['create', 'list', 'rotate', 'plan', 'expire', 'revoke', 'unban'];
  const version = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

  test('--help on every command and subcommand prints its usage on stdout, exits 0, and reads no configuration or database', async (t) => {
    await inSandbox(t, async (box) => {
      // A configuration that would stop any command that read it, and a database that must not appear.
      const env = box.env({ PORT: 'not-a-port', PETSTORE_ENV: 'nowhere' });
      writeFileSync(join(box.dir, '.env'), 'LOG_LEVEL=loudest\n');
      const runs: [string[], RegExp][] = [
        [[], /^petstore: the pet adoption service/],
        [['--help'], /^petstore: the pet adoption service/],
        [['-h'], /^petstore: the pet adoption service/],
        [['help'], /^petstore: the pet adoption service/],
        [['serve', '--help'], /^Usage: petstore serve \[--port N\] \[--host ADDRESS\]\n/],
        [['serve', '-h'], /^Usage: petstore serve /],
        [['serve', '--port', '1', '--help'], /^Usage: petstore serve /],
        [['keys'], /^Usage: petstore keys COMMAND/],
        [['keys', '--help'], /^Usage: petstore keys COMMAND/],
        [['help', 'keys', 'create'], /^Usage: petstore keys create --plan /],
        ...SUBCOMMANDS.map((sub): [string[], RegExp] => [['keys', sub, '--help'], new RegExp(`^Usage: petstore keys ${sub}[ \n]`)]),
        // Help wins over anything else typed with it, even a flag the command does not take.
        [['keys', 'list', '--plan', 'pro', '--help'], /^Usage: petstore keys list /],
      ];
      await Promise.all(
        runs.map(async ([args, usage]) => {
          const r = await runCli(args, env, { cwd: box.dir });
          assert.equal(r.code, 0, explain(args, r));
          assert.match(r.stdout, usage, explain(args, r));
          assert.equal(r.stderr, '', explain(args, r));
        }),
      );
      const top = (await runCli(['--help'], env, { cwd: box.dir })).stdout;
      for (const sub of SUBCOMMANDS) assert.match(top, new RegExp(`^  petstore keys ${sub} `, 'm'));
      assert.match(top, /Exit status: 0 .*; 1 .*\n?.*2 the command line is wrong/s);
      const keysHelp = (await runCli(['keys', '--help'], env, { cwd: box.dir })).stdout;
      for (const sub of SUBCOMMANDS) assert.match(keysHelp, new RegExp(`^  ${sub}\\b`, 'm'));
      const create = (await runCli(['keys', 'create', '--help'], env, { cwd: box.dir })).stdout;
      for (const flag of ['--plan PLAN', '--rpm N', '--rpd N', '--label TEXT', '--json', '-h, --help'])
        assert.ok(create.includes(flag), create);
      assert.deepEqual(readdirSync(box.dir), ['.env'], 'no database file or folder was created');
    });
  });

  test('--version and -v print the package version', async () => {
    for (const flag of ['--version', '-v']) {
      const r = await ok([flag], {});
      assert.equal(r.stdout, `petstore ${version}\n`);
    }
  });

  test('an unknown command, keys subcommand or option exits 2 with one line pointing at --help', async (t) => {
    await inSandbox(t, async (box) => {
      const env = box.env();
      await Promise.all([
        misused(['frobnicate'], env, /^petstore: unknown command "frobnicate"; see petstore --help\n$/),
        misused(['keys', 'renew'], env, /^petstore: unknown keys command "renew"; see petstore keys --help\n$/),
        misused(['--verbose'], env, /^petstore: unknown option --verbose; see petstore --help\n$/),
        misused(['keys', '--json', 'list'], env, /^petstore: keys needs a command before --json; see petstore keys --help\n$/),
      ]);
      assert.deepEqual(readdirSync(box.dir), [], 'no database was created');
    });
  });

  test("each command refuses flags it does not take, another command's included, with exit 2 and no side effect", async (t) => {
    await inSandbox(t, async (box) => {
      const env = box.env();
      const refusals: [string[], RegExp][] = [
        [['keys', 'list', '--plan', 'pro'], /^petstore: keys list does not take --plan; see petstore keys list --help\n$/],
        [['keys', 'create', '--plan', 'free', '--wide'], /keys create does not take --wide; see petstore keys create --help/],
        [['keys', 'revoke', 'key_0000000000000000', '--grace', '1h'], /keys revoke does not take --grace/],
        [['keys', 'unban', 'key_0000000000000000', '--force'], /keys unban does not take --force/],
        [['keys', 'create', '--plan', 'free', '-p'], /keys create does not take -p;/],
        [['serve', '--bogus'], /^petstore: serve does not take --bogus; see petstore serve --help\n$/],
        [['serve', '--plan', 'pro'], /serve does not take --plan/],
        [['serve', 'now'], /^petstore: serve: unexpected argument "now"; see petstore serve --help\n$/],
        [['serve', '--port'], /^petstore: --port needs a value; see petstore serve --help\n$/],
        [['serve', '--port', 'abc'], /^petstore: --port must be an integer from 0 to 65535, got "abc"\n$/],
        [['keys', 'list', 'extra'], /keys list: unexpected argument "extra"/],
        [['keys', 'list', '--json=yes'], /--json takes no value/],
        [['keys', 'list', '--json', '--wide'], /keys list takes --wide or --json, not both/],
        [['keys', 'revoke'], /^petstore: keys revoke needs a key ID \(petstore keys list shows them\); see petstore keys revoke --help\n$/],
        [['keys', 'create', '--plan', 'enterprise', '--rpm', '100', '--rpd', '50'], /--rpd \(50\) must be at least --rpm \(100\)/],
      ];
      await Promise.all(refusals.map(([args, message]) => misused(args, env, message)));
      assert.deepEqual(readdirSync(box.dir), [], 'no refused command created the database');
    });
  });

  test('keys expire refuses a moment in the past unless --force', async (t) => {
    await inSandbox(t, async (box) => {
      const key = await keysCreateJson(box.env(), '--plan', 'free');
      await misused(
        ['keys', 'expire', key.id, '--at', '2020-01-01T00:00:00Z'],
        box.env(),
        /--at 2020-01-01T00:00:00Z is in the past.*--force/,
      );
      assert.equal((await listJson(box.env()))[0]!.expiresAt, null, 'the refused expiry was not stored');
      const forced = await ok(['keys', 'expire', key.id, '--at', '2020-01-01T00:00:00Z', '--force', '--json'], box.env());
      assert.equal(JSON.parse(lastLine(forced.stdout)).expiresAt, '2020-01-01T00:00:00.000Z');
      // A date to come needs no --force.
      await ok(['keys', 'expire', key.id, '--at', '2099-01-01T00:00:00Z'], box.env());
    });
  });

  test('keys list fits 100 columns with long labels and limits, cutting labels that --wide and --json show whole', async (t) => {
    await inSandbox(t, async (box) => {
      const long = 'for the partner integration of a very large shelter network, '.repeat(4).slice(0, 200);
      const keys = await Promise.all([
        keysCreateJson(box.env(), '--plan', 'free', '--label', long),
        keysCreateJson(box.env(), '--plan', 'enterprise', '--rpm', '1999999', '--rpd', '19999999', '--label', long),
        keysCreateJson(box.env({ PETSTORE_ENV: 'staging' }), '--plan', 'business', '--label', 'short label'),
        keysCreateJson(box.env(), '--plan', 'pro'),
      ]);
      await ok(['keys', 'rotate', keys[0].id, '--grace', '7d'], box.env());
      await ok(['keys', 'revoke', keys[3].id], box.env());

      const table = (await ok(['keys', 'list'], box.env())).stdout.trimEnd().split('\n');
      assert.equal(table.length, 1 + 5, table.join('\n'));
      assert.match(table[0]!, /^ID\s+PREFIX\s+PLAN\s+LIMITS\s+STATE\s+LABEL$/);
      for (const line of table) assert.ok([...line].length <= 100, `${[...line].length} columns: ${line}`);
      const row = (id: string) => table.find((line) => line.startsWith(id))!;
      assert.match(row(keys[0].id), /free\s+60\/min 1000\/day\s+until \d{4}-\d{2}-\d{2}\s+for[^…]*…$/);
      assert.match(row(keys[1].id), /enterprise\s+≈2M\/min ≈20M\/day\s+active\s/);
      assert.match(row(keys[2].id), /^key_\w+\s+pet_test_\S+…\s+business\s+1000\/min 100k\/day\s+active\s+short label$/);
      assert.match(row(keys[3].id), /\srevoked$/);

      const wide = (await ok(['keys', 'list', '--wide'], box.env())).stdout;
      assert.ok(wide.includes(long), 'the wide table shows the whole label');
      assert.ok(wide.includes('19999999'), 'and the exact limits');
      const json = await listJson(box.env());
      assert.equal(json.find((r) => r.id === keys[0].id)!.label, long);
    });
  });
});

describe('labels on a terminal', () => {
  /** What would act on a terminal or reorder what it shows: controls, bidi overrides and isolates, zero-width spaces. */
  // eslint-disable-next-line no-control-regex -- raw control characters are what it looks for
  const RAW_UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]/;

  function setLabel(dbPath: string, keyId: string, label: string): void {
    const db = new DatabaseSync(dbPath);
    try {
      db.exec('PRAGMA busy_timeout = 5000');
      assert.equal(db.prepare('UPDATE api_keys SET label = ? WHERE id = ?').run(label, keyId).changes, 1);
    } finally {
      db.close();
    }
  }

  test('a label written straight into the database is escaped in list, --wide, --json and rotate, and cannot forge a row', async (t) => {
    await inSandbox(t, async (box) => {
      const [victim, cutOne] = await Promise.all([
        keysCreateJson(box.env(), '--plan', 'free'),
        keysCreateJson(box.env(), '--plan', 'free'),
      ]);
      // Clears the screen, then a whole forged row of an active Enterprise key, then a carriage return, a C1 CSI and a bidi override.
      const forged = 'key_0000000000000000  pet_live_forged…  enterprise  5000/min 2M/day  active';
      const label = `\u001b[2J\n${forged}\r\u009b\u202eevil`;
      setLabel(box.dbPath, victim.id, label);
      // An escape that would straddle the default table's edge is left out whole.
      setLabel(box.dbPath, cutOne.id, `${'x'.repeat(25)}\u202etail`);
      const shown = `\\u001b[2J\\n${forged}\\r\\u009b\\u202eevil`;

      const table = await ok(['keys', 'list'], box.env());
      assert.doesNotMatch(table.stdout, RAW_UNSAFE);
      // The prefix has a fixed length, so the label column starts at the same place on every run and has 29 columns.
      assert.equal(victim.prefix.length, 15);
      assert.deepEqual(
        table.stdout.trimEnd().split('\n').sort(),
        [
          'ID                    PREFIX            PLAN  LIMITS           STATE   LABEL',
          `${victim.id}  ${victim.prefix}…  free  60/min 1000/day  active  \\u001b[2J\\nkey_0000000000000…`,
          `${cutOne.id}  ${cutOne.prefix}…  free  60/min 1000/day  active  ${'x'.repeat(25)}…`,
        ].sort(),
      );

      const rows = await listJson(box.env());
      const createdAt = (id: string) => rows.find((r) => r.id === id)!.createdAt;
      const wide = await ok(['keys', 'list', '--wide'], box.env());
      assert.doesNotMatch(wide.stdout, RAW_UNSAFE);
      assert.deepEqual(
        wide.stdout.trimEnd().split('\n').sort(),
        [
          'ID                    PREFIX            ENV         PLAN  RPM  RPD   STATE   CREATED                   EXPIRES  LABEL',
          `${victim.id}  ${victim.prefix}…  production  free  60   1000  active  ${createdAt(victim.id)}  never    ${shown}`,
          `${cutOne.id}  ${cutOne.prefix}…  production  free  60   1000  active  ${createdAt(cutOne.id)}  never    ${'x'.repeat(25)}\\u202etail`,
        ].sort(),
      );

      // JSON escapes C0 by itself; DEL, C1 and format characters are escaped too, and parse back to the stored label.
      const json = await ok(['keys', 'list', '--json'], box.env());
      assert.doesNotMatch(json.stdout, RAW_UNSAFE);
      assert.equal(rows.find((r) => r.id === victim.id)!.label, label);

      // A replacement copies the label as it is; its output escapes it all the same.
      const rotated = await ok(['keys', 'rotate', victim.id, '--json'], box.env());
      assert.doesNotMatch(rotated.stdout, RAW_UNSAFE);
      assert.equal(JSON.parse(lastLine(rotated.stdout)).label, label);
    });
  });

  test('keys create refuses a label with a control or format character in one line naming it, and stores nothing', async (t) => {
    await inSandbox(t, async (box) => {
      const env = box.env();
      const refusals: [string, RegExp][] = [
        ['a\u001b[2Jb', /U\+001B at character 2\n$/],
        ['two\nlines', /U\+000A at character 4\n$/],
        ['back\rover', /U\+000D at character 5\n$/],
        ['tab\there', /U\+0009 at character 4\n$/],
        ['del\u007f', /U\+007F at character 4\n$/],
        ['c1\u009b2J', /U\+009B at character 3\n$/],
        ['👩‍💻\u202eevil', /U\+202E at character 4\n$/],
        ['iso\u2066late', /U\+2066 at character 4\n$/],
        ['zero\u200bwidth', /U\+200B at character 5\n$/],
        ['line\u2028sep', /U\+2028 at character 5\n$/],
      ];
      await Promise.all(
        refusals.map(async ([label, position]) => {
          const stderr = await misused(['keys', 'create', '--plan', 'free', '--label', label], env, position);
          assert.match(stderr, /^petstore: --label must be printable text, without control or format characters \(line breaks, tabs, /);
          assert.doesNotMatch(stderr, RAW_UNSAFE, 'the refusal does not echo the character');
        }),
      );
      assert.equal((await listJson(env)).length, 0, 'no refused label was stored');

      // Joiners are part of ordinary text (emoji, Persian, Indic scripts): kept and shown as they are.
      const emoji = await keysCreateJson(env, '--plan', 'free', '--label', 'team 👩‍💻 Ünïcode');
      assert.equal(emoji.label, 'team 👩‍💻 Ünïcode');
      assert.match((await ok(['keys', 'list', '--wide'], env)).stdout, / {2}team 👩‍💻 Ünïcode$/m);
    });
  });

  test('an ID written straight into the database is escaped in the table and in the lines that name it', async (t) => {
    await inSandbox(t, async (box) => {
      const key = await keysCreateJson(box.env(), '--plan', 'free');
      const id = 'key_\u001b[2J\u202e';
      const db = new DatabaseSync(box.dbPath);
      try {
        db.prepare('UPDATE api_keys SET id = ?, subject_id = ? WHERE id = ?').run(id, id, key.id);
      } finally {
        db.close();
      }
      const table = (await ok(['keys', 'list'], box.env())).stdout;
      assert.doesNotMatch(table, RAW_UNSAFE);
      assert.match(table, /^key_\\u001b\[2J\\u202e {2}pet_live_/m);
      const expired = await ok(['keys', 'expire', id, '--never'], box.env());
      assert.equal(expired.stdout, 'key_\\u001b[2J\\u202e no longer expires.\n');
      const planned = await ok(['keys', 'plan', id, '--plan', 'pro'], box.env());
      assert.match(planned.stdout, /^key_\\u001b\[2J\\u202e is now on plan pro /);
      assert.doesNotMatch(planned.stdout, RAW_UNSAFE);
    });
  });

  test('a refusal that quotes an argument escapes it: a key ID cannot clear the screen', async (t) => {
    await inSandbox(t, async (box) => {
      const stderr = await fails(
        ['keys', 'revoke', 'key_\u001b[2J\u202e'],
        box.env(),
        /^petstore: no active key with ID key_\\u001b\[2J\\u202e \(petstore keys list shows each key's ID and state\)\n$/,
      );
      assert.doesNotMatch(stderr, RAW_UNSAFE);
    });
  });
});
