/**
 * `petstore backup` and `petstore restore` as an operator runs them, against a real server on a real
 * SQLite file: a backup taken while several writers create pets holds every pet acknowledged before
 * it started and passes SQLite's integrity check; a server started on the restored file answers with
 * the same pets and keys, even though the old database's -wal still held later commits; a backup
 * killed with SIGKILL leaves nothing at its target; restore is refused while a server has the
 * database open (an idle one too), for a corrupt file and for a newer schema; a server that starts
 * while a restore swaps the file opens the new one; PostgreSQL is pointed to pg_dump.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseSync, inWriteTransaction } from '../../src/storage/sqlite/driver.ts';
import { LATEST_SQLITE_VERSION, SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import {
  CLI,
  cliEnv,
  explain,
  keysCreateJson,
  lastLine,
  runCli,
  startServerProcess,
  unlimitedKey,
  type CliResult,
  type EnvOverrides,
  type ServerProcess,
} from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';

interface Pet {
  id: number;
  name: string;
  categoryId: number;
  status: string;
}

const STATUSES = ['available', 'pending', 'sold'];

/** Adds count pets straight into the file, in one transaction (as bench/ prepares its data). */
function addPets(path: string, count: number): void {
  const db = new DatabaseSync(path);
  const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)');
  inWriteTransaction(db, () => {
    for (let i = 1; i <= count; i++) insert.run(`seeded ${i}`, i, STATUSES[i % STATUSES.length]!);
  });
  db.close();
}

/** A migrated database of SEEDED pets, made once for the file and copied by each test that needs one. */
const SEEDED = 20_000;
let templateDir: string | undefined;
let template: string;

before(async () => {
  templateDir = tempDir();
  template = join(templateDir, 'template.db');
  await openSqliteStore({ path: template, synchronous: 'normal' }).close();
  addPets(template, SEEDED);
});
after(() => {
  if (templateDir) rmSync(templateDir, { recursive: true, force: true });
});

interface Box {
  dir: string;
  db: string;
  env: EnvOverrides;
}

/** A folder of the test's own, removed with it, holding a copy of the template as its database. */
function sandbox(t: { after(fn: () => void): void }): Box {
  const dir = tempDir(t);
  const db = join(dir, 'petstore.db');
  copyFileSync(template, db);
  return { dir, db, env: { DATABASE_URL: `sqlite:${db}` } };
}

/** Every pet in a SQLite file, read directly and read-only. */
function petsInFile(path: string): Map<number, Pet> {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const rows = db.prepare('SELECT id, name, category_id AS categoryId, status FROM pets ORDER BY id').all() as unknown as Pet[];
    return new Map(rows.map((pet) => [pet.id, { ...pet }]));
  } finally {
    db.close();
  }
}

function integrityOf(path: string): string {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return (db.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[]).map((r) => r.integrity_check).join('; ');
  } finally {
    db.close();
  }
}

const petOf = (p: Pet): Pet => ({ id: p.id, name: p.name, categoryId: p.categoryId, status: p.status });

/** Every pet a server lists, page by page. */
async function petsServed(server: ServerProcess, key: string): Promise<Map<number, Pet>> {
  const pets = new Map<number, Pet>();
  let next: string | null = '/v1/pets?limit=100';
  while (next) {
    const res = await fetch(server.url + next, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    for (const pet of (await res.json()) as Pet[]) pets.set(pet.id, petOf(pet));
    next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
  }
  return pets;
}

async function stop(server: ServerProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill(signal);
  await server.exited;
}

const run = (args: string[], env: EnvOverrides) => runCli(args, env, { timeoutMs: 60_000 });

async function ok(args: string[], env: EnvOverrides): Promise<CliResult> {
  const r = await run(args, env);
  assert.equal(r.code, 0, explain(args, r));
  return r;
}

/** A refusal: exit 1, one line on stderr matching message, nothing on stdout. */
async function refused(args: string[], env: EnvOverrides, message: RegExp): Promise<void> {
  const r = await run(args, env);
  assert.equal(r.code, 1, explain(args, r));
  assert.match(r.stderr, message, explain(args, r));
  assert.equal(r.stderr.trimEnd().split('\n').length, 1, `one line: ${explain(args, r)}`);
  assert.equal(r.stdout, '', explain(args, r));
}

/** What `keys list --json` says of each key, but its ban (which depends on the time). */
async function keysListed(env: EnvOverrides): Promise<unknown[]> {
  const listed = JSON.parse(lastLine((await ok(['keys', 'list', '--json'], env)).stdout)) as Record<string, unknown>[];
  return listed.map(({ bannedUntil: _, ...rest }) => rest);
}

/** Writers creating pets through the server until stopped: what was acknowledged, and any answer that was not a 201. */
function startWriters(server: ServerProcess, key: string, count: number) {
  const acknowledged = new Map<number, Pet>();
  const failures: string[] = [];
  let stopped = false;
  const writer = async (w: number) => {
    for (let i = 0; !stopped; i++) {
      const res = await fetch(`${server.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `w${w}-${i}`, categoryId: w * 1_000_000 + i + 1 }),
      });
      const text = await res.text();
      if (res.status === 201) {
        const pet = JSON.parse(text) as Pet;
        acknowledged.set(pet.id, petOf(pet));
      } else failures.push(`${res.status} ${text}`);
    }
  };
  const running = Promise.all(Array.from({ length: count }, (_, w) => writer(w)));
  return {
    acknowledged,
    failures,
    async until(condition: () => boolean): Promise<void> {
      while (!condition()) await sleep(5);
    },
    async stop(): Promise<void> {
      stopped = true;
      await running;
    },
  };
}

/** The files in a folder, but those named. */
const filesIn = (dir: string, ...but: string[]) =>
  readdirSync(dir)
    .filter((name) => !but.includes(name))
    .sort();

describe('backup under load, and restore', () => {
  test('a backup taken while 8 writers create pets holds every pet acknowledged before it; the restored file serves the same pets and keys', async (t) => {
    const box = sandbox(t);
    const key = await unlimitedKey(box.env);
    await keysCreateJson(box.env, '--plan', 'pro', '--label', 'shop');
    const revoked = await keysCreateJson(box.env, '--plan', 'free');
    await ok(['keys', 'revoke', revoked.id], box.env);
    const keysBefore = await keysListed(box.env);
    const backupFile = join(box.dir, 'backup.db');
    let later: string;
    let lastHandedOut: number;

    const server = await startServerProcess(box.env);
    try {
      const writers = startWriters(server, key, 8);
      await writers.until(() => writers.acknowledged.size >= 200);
      const before = new Map(writers.acknowledged);
      const backup = await run(['backup', backupFile], box.env);
      const duringBackup = writers.acknowledged.size - before.size;
      // Writes after it, which it must not hold, and which the server's -wal keeps at the kill below.
      await writers.until(() => writers.acknowledged.size >= before.size + duringBackup + 100);
      await writers.stop();
      assert.equal(backup.code, 0, explain(['backup', backupFile], backup));
      assert.match(
        backup.stdout,
        /^Backed up \d+ pets and 3 API keys \(schema version \d+, [\d.]+ MB\) from .+ to .+backup\.db in [\d.]+ s\.\n$/,
      );
      assert.deepEqual(writers.failures, [], 'every create was answered 201 while the backup ran');
      assert.ok(duringBackup > 0, 'pets were created while the backup ran');

      assert.equal(integrityOf(backupFile), 'ok');
      const copied = petsInFile(backupFile);
      assert.equal(Number(/^Backed up (\d+) pets/.exec(backup.stdout)![1]), copied.size, 'the count printed is the count copied');
      for (const [id, pet] of before) assert.deepEqual(copied.get(id), pet, `pet ${id}, acknowledged before the backup, is in it`);
      // A snapshot, not a torn copy: up to the highest id it holds, it holds every acknowledged pet.
      const highest = Math.max(...copied.keys());
      for (const [id, pet] of writers.acknowledged) if (id <= highest) assert.deepEqual(copied.get(id), pet, `pet ${id}, below ${highest}`);
      for (const [id, pet] of copied) if (id > SEEDED) assert.deepEqual(pet, writers.acknowledged.get(id), `pet ${id} was acknowledged`);
      assert.ok(writers.acknowledged.size > copied.size - SEEDED, 'later pets are not in the backup');
      console.log(`# ${before.size} pets acknowledged before the backup, ${duringBackup} while it ran; ${copied.size} copied`);

      // The server dies with later commits in its -wal, after a key was made that the backup lacks.
      later = (await keysCreateJson(box.env, '--plan', 'free')).key;
      await stop(server, 'SIGKILL');
      assert.ok(statSync(`${box.db}-wal`).size > 0, 'the old database has a -wal beside it');

      const restore = await ok(['restore', backupFile], box.env);
      assert.match(restore.stdout, new RegExp(`^Restored ${copied.size} pets and 3 API keys \\(schema version ${LATEST_SQLITE_VERSION}, `));
      // Ids are never reused: the ids handed out after the backup are not handed out again.
      lastHandedOut = Math.max(...writers.acknowledged.keys());
      assert.match(restore.stdout, new RegExp(`\\nNew pets get ids above ${lastHandedOut}, the highest the replaced database handed out`));
      assert.deepEqual(filesIn(box.dir), ['backup.db', 'petstore.db'], 'nothing of the old database and no partial file is left');
    } finally {
      await stop(server, 'SIGKILL');
    }

    const again = await startServerProcess(box.env);
    try {
      assert.deepEqual(await petsServed(again, key), petsInFile(backupFile), 'the server lists exactly the pets of the backup');
      const refusedKey = await fetch(`${again.url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${later}` } });
      assert.equal(refusedKey.status, 401, 'the key made after the backup is gone');
      const next = await fetch(`${again.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'after the restore', categoryId: 1 }),
      });
      assert.equal(((await next.json()) as Pet).id, lastHandedOut + 1, 'the next pet gets an id never handed out');
    } finally {
      await stop(again);
    }
    assert.deepEqual(await keysListed(box.env), keysBefore, 'the keys are those of the backup');
    assert.equal(integrityOf(box.db), 'ok');
  });

  test('a backup killed with SIGKILL leaves nothing at FILE; its partial file is named for it, and the next backup removes it', async (t) => {
    const box = sandbox(t);
    addPets(box.db, 200_000); // enough that the copy takes a while
    const key = await unlimitedKey(box.env);
    const server = await startServerProcess(box.env);
    try {
      const target = join(box.dir, 'nightly.db');
      const child = spawn(process.execPath, [CLI, 'backup', target], { env: cliEnv(box.env), stdio: 'ignore' });
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      const partial = `${target}.partial-${hostname()}-${child.pid}`;
      while (!existsSync(partial) && child.exitCode === null) await sleep(1);
      assert.equal(child.exitCode, null, 'the backup was still copying when its partial file appeared');
      child.kill('SIGKILL');
      assert.equal(await exited, null);
      assert.equal(existsSync(target), false, 'no file at FILE');
      assert.ok(existsSync(partial), `the killed backup's copy is left as ${partial}`);

      // The server never noticed, and the next backup clears the leftover.
      const created = await fetch(`${server.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'after the kill', categoryId: 1 }),
      });
      assert.equal(created.status, 201);
      await ok(['backup', target], box.env);
      assert.deepEqual(filesIn(box.dir, 'petstore.db', 'petstore.db-wal', 'petstore.db-shm'), ['nightly.db']);
      assert.equal(integrityOf(target), 'ok');
      assert.equal(petsInFile(target).size, SEEDED + 200_000 + 1);
    } finally {
      await stop(server);
    }
  });

  test('backup refuses an existing FILE unless --force, and the database itself or its -wal even with it', async (t) => {
    const box = sandbox(t);
    const target = join(box.dir, 'copy.db');
    writeFileSync(target, 'an earlier file');
    await refused(['backup', target], box.env, /^petstore: .*copy\.db exists; add --force to replace it\n$/);
    assert.equal(readFileSync(target, 'utf8'), 'an earlier file', 'the refused backup left FILE as it was');
    await ok(['backup', target, '--force'], box.env);
    assert.equal(petsInFile(target).size, SEEDED);
    for (const own of [box.db, `${box.db}-wal`]) await refused(['backup', own, '--force'], box.env, /is the database itself/);
    await refused(['backup', join(box.dir, 'no', 'such', 'folder.db')], box.env, /is not an existing folder; create it first/);
    assert.deepEqual(filesIn(box.dir, 'petstore.db'), ['copy.db'], 'no partial file is left');
  });

  test('restore is refused while a server has the database open, idle or not, and leaves it as it was', async (t) => {
    const box = sandbox(t);
    const backupFile = join(box.dir, 'backup.db');
    await ok(['backup', backupFile], box.env);
    const key = await unlimitedKey(box.env);
    const server = await startServerProcess(box.env);
    try {
      // Idle: no request since it started, so it holds no write lock, only the shared lock of its
      // open WAL connection (which BEGIN EXCLUSIVE would not have met).
      await refused(
        ['restore', backupFile],
        box.env,
        /^petstore: a server or another process has .*petstore\.db open: stop it, then run petstore restore again\n$/,
      );
      const created = await fetch(`${server.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'kept', categoryId: 7 }),
      });
      assert.equal(created.status, 201, 'the server still writes');
      await refused(['restore', backupFile], box.env, /has .*petstore\.db open/);
      const list = await fetch(`${server.url}/v1/pets?status=available&limit=1`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(list.status, 200);
    } finally {
      await stop(server);
    }
    assert.deepEqual(filesIn(box.dir, 'petstore.db'), ['backup.db'], 'no partial file is left');
    assert.equal(petsInFile(box.db).size, SEEDED + 1, 'the database is as the server left it');
  });

  test('restore refuses a corrupt file, a file that is no database, and a newer schema, leaving the database as it was', async (t) => {
    const box = sandbox(t);
    const good = join(box.dir, 'good.db');
    await ok(['backup', good], box.env);

    const corrupt = join(box.dir, 'corrupt.db');
    const bytes = readFileSync(good);
    bytes.fill(0x5a, Math.floor(bytes.length / 2), Math.floor(bytes.length / 2) + 8192); // two pages of the pets table
    writeFileSync(corrupt, bytes);
    await refused(['restore', corrupt], box.env, /^petstore: .*corrupt\.db fails SQLite's integrity check: /);

    const text = join(box.dir, 'notes.txt');
    writeFileSync(text, 'not a database at all\n'.repeat(100));
    await refused(['restore', text], box.env, /notes\.txt fails SQLite's integrity check: file is not a database/);

    const newer = join(box.dir, 'newer.db');
    copyFileSync(good, newer);
    const db = new DatabaseSync(newer);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
      LATEST_SQLITE_VERSION + 1,
      'from the future',
      Date.now(),
    );
    db.close();
    await refused(
      ['restore', newer],
      box.env,
      new RegExp(`newer\\.db has schema version ${LATEST_SQLITE_VERSION + 1}, newer than this release's ${LATEST_SQLITE_VERSION}`),
    );

    await refused(['restore', join(box.dir, 'missing.db')], box.env, /there is no backup file at .*missing\.db/);
    assert.deepEqual(filesIn(box.dir, 'petstore.db'), ['corrupt.db', 'good.db', 'newer.db', 'notes.txt'], 'no partial file is left');
    assert.equal(petsInFile(box.db).size, SEEDED);
  });

  test('restore puts an older schema in place of no database at all, and the next start migrates it', async (t) => {
    const dir = tempDir(t);
    const older = join(dir, 'older.db');
    const db = new DatabaseSync(older);
    db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    for (const m of SQLITE_MIGRATIONS.slice(0, -1)) {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
    }
    db.exec("INSERT INTO pets (name, category_id, status) VALUES ('old timer', 3, 'sold')");
    db.close();

    const env = { DATABASE_URL: `sqlite:${join(dir, 'fresh.db')}` };
    const restore = await ok(['restore', older], env);
    const previous = LATEST_SQLITE_VERSION - 1;
    assert.match(restore.stdout, new RegExp(`^Restored 1 pet and 0 API keys \\(schema version ${previous}, [\\d.]+ kB\\)`));
    assert.match(restore.stdout, new RegExp(`migrates it from schema version ${previous} to ${LATEST_SQLITE_VERSION}\\.\\n$`));
    const key = (await keysCreateJson(env, '--plan', 'free')).key; // opens, and so migrates, the database
    const server = await startServerProcess(env);
    try {
      const res = await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
      assert.deepEqual(
        ((await res.json()) as Pet[]).map((p) => p.name),
        ['old timer'],
      );
    } finally {
      await stop(server);
    }
    const migrated = new DatabaseSync(join(dir, 'fresh.db'), { readOnly: true });
    assert.deepEqual({ ...migrated.prepare('SELECT max(version) AS v FROM schema_migrations').get() }, { v: LATEST_SQLITE_VERSION });
    migrated.close();
  });

  test('a server that starts while a restore holds the old file opens the file renamed into place', async (t) => {
    const box = sandbox(t);
    const key = await unlimitedKey(box.env);
    const replacement = join(box.dir, 'replacement.db');
    await ok(['backup', replacement], box.env);
    addPets(replacement, 1); // the replacement has one pet more than the file a server would open first
    // What restore does, one step at a time: take the old file's exclusive lock, and on a line on
    // stdin rename the replacement over it, then let the lock go.
    const holder = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { DatabaseSync } from 'node:sqlite';
         import { renameSync } from 'node:fs';
         const [path, replacement] = process.argv.slice(1);
         const db = new DatabaseSync(path);
         for (const s of ['PRAGMA locking_mode = EXCLUSIVE', 'PRAGMA journal_mode = MEMORY', 'BEGIN EXCLUSIVE', 'COMMIT']) db.exec(s);
         console.log('locked');
         process.stdin.once('data', () => { renameSync(replacement, path); db.close(); console.log('swapped'); process.exit(0); });`,
        box.db,
        replacement,
      ],
      { stdio: ['pipe', 'pipe', 'inherit'], env: cliEnv({ NODE_OPTIONS: '--disable-warning=ExperimentalWarning' }) },
    );
    t.after(() => holder.kill('SIGKILL'));
    await lineFrom(holder, 'locked');
    const starting = startServerProcess(box.env);
    // Once the starting server has the old file open (it then waits for the lock), the file is swapped.
    await waitForOpenFile(box.db, [process.pid, holder.pid!]);
    holder.stdin!.write('go\n');
    await lineFrom(holder, 'swapped');
    const server = await starting;
    try {
      assert.equal((await petsServed(server, key)).size, SEEDED + 1, 'the server serves the file now at the path');
    } finally {
      await stop(server);
    }
    assert.equal(integrityOf(box.db), 'ok');
  });
});

async function lineFrom(child: ChildProcess, line: string): Promise<void> {
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.split('\n').includes(line)) {
        child.stdout!.off('data', onData);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', () => reject(new Error(`exited before printing ${line}; printed ${seen}`)));
  });
}

/** Waits until a process, but those named, has path open (read from /proc: this is Linux). */
async function waitForOpenFile(path: string, but: number[]): Promise<void> {
  for (;;) {
    for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name) && !but.includes(Number(name)))) {
      try {
        for (const fd of readdirSync(`/proc/${pid}/fd`)) if (readlinkSync(`/proc/${pid}/fd/${fd}`) === path) return;
      } catch {
        // gone, or not ours to read
      }
    }
    await sleep(10);
  }
}

describe('PostgreSQL and help', () => {
  test('backup and restore on a PostgreSQL DATABASE_URL are refused in one line naming its tools, without connecting', async () => {
    const env = { DATABASE_URL: 'postgres://petstore:secret@127.0.0.1:1/petstore' };
    await refused(
      ['backup', 'out.db'],
      env,
      /^petstore: backup is for the embedded SQLite database; DATABASE_URL names PostgreSQL at 127\.0\.0\.1:1, database petstore: back it up with pg_dump \(see docs\/operations\.md, "Backups"\)\n$/,
    );
    await refused(
      ['restore', 'in.db'],
      env,
      /^petstore: restore is for the embedded SQLite database; .*pg_restore or psql \(see docs\/operations\.md, "Backups"\)\n$/,
    );
  });

  test('--help documents backup and restore, and reads no configuration', async () => {
    const env = { DATABASE_URL: 'sqlite:/nonexistent/folder/petstore.db', PORT: 'not-a-port' };
    const top = await ok(['--help'], env);
    assert.match(top.stdout, /^ {2}petstore backup FILE \[--force\]$/m);
    assert.match(top.stdout, /^ {2}petstore restore FILE$/m);
    const backup = await ok(['backup', '--help'], env);
    assert.match(backup.stdout, /^Usage: petstore backup FILE \[--force\]\n/);
    assert.match(backup.stdout, /--force .*Replace FILE/);
    assert.match(backup.stdout, /pg_dump/);
    const restore = await ok(['help', 'restore'], env);
    assert.match(restore.stdout, /^Usage: petstore restore FILE\n/);
    assert.match(restore.stdout, /integrity check/);
    const missing = await run(['restore'], env);
    assert.equal(missing.code, 2, explain(['restore'], missing));
    assert.equal(missing.stderr, 'petstore: restore needs a file; see petstore restore --help\n');
  });
});
