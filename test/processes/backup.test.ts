/**
 * `petstore backup` and `petstore restore` as an operator runs them, against a real server on a real
 * SQLite file: a backup taken while several writers create pets holds every pet acknowledged before
 * it started and passes SQLite's integrity check; a server started on the restored file answers with
 * the same pets and keys, even though the old database's -wal still held later commits; a backup
 * killed with SIGKILL leaves nothing at its target; restore is refused while a server has the
 * database open (an idle one too), for a corrupt file and for a newer schema; a server that starts
 * while a restore swaps the file opens the new one; PostgreSQL is pointed to pg_dump. And what they
 * protect: a backup of the other environment is refused unless named; a symbolic link is followed and
 * kept; a restore into an empty path locks it first; modes and owners are kept, and backups no more
 * readable than the database; files are told apart by device and inode; a backup whose bytes changed
 * (12 of a pet's name) is refused by restore and by --verify against its checksum.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseSync, inWriteTransaction } from '../../src/storage/sqlite/driver.ts';
import { LATEST_SQLITE_VERSION, SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import {
  CLI,
  cliEnv,
  explain,
  keysCreate,
  keysCreateJson,
  lastLine,
  runCli,
  startServerProcess,
  unlimitedKey,
  type CliResult,
  type CreatedKey,
  type EnvOverrides,
  type ServerProcess,
} from '../support/processes.ts';
import { restoreUnderStrace } from '../support/held-restore.ts';
import { ROOT } from '../support/project-copy.ts';
import { atEnd, tempDir } from '../support/temp.ts';
import { requireTool } from '../support/tools.ts';

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
        /^Backed up \d+ pets and 3 API keys of production \(schema version \d+, [\d.]+ MB\) from .+ to .+backup\.db in [\d.]+ s\.\nIts SHA-256 is in .+backup\.db\.sha256: copy the two together; restore checks it\.\n$/,
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
      assert.match(
        restore.stdout,
        new RegExp(`^Restored ${copied.size} pets and 3 API keys of production \\(schema version ${LATEST_SQLITE_VERSION}, `),
      );
      // Ids are never reused: the ids handed out after the backup are not handed out again.
      lastHandedOut = Math.max(...writers.acknowledged.keys());
      assert.match(restore.stdout, new RegExp(`\\nNew pets get ids above ${lastHandedOut}, the highest the replaced database handed out`));
      const left = filesIn(box.dir);
      assert.deepEqual(left, ['backup.db', 'backup.db.sha256', 'petstore.db'], 'nothing of the old database and no partial file is left');
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
      assert.equal(existsSync(`${target}.sha256`), false, 'no checksum of a backup that is not there');
      assert.ok(existsSync(partial), `the killed backup's copy is left as ${partial}`);

      // The server never noticed, and the next backup clears the leftover.
      const created = await fetch(`${server.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'after the kill', categoryId: 1 }),
      });
      assert.equal(created.status, 201);
      await ok(['backup', target], box.env);
      assert.deepEqual(filesIn(box.dir, 'petstore.db', 'petstore.db-wal', 'petstore.db-shm'), ['nightly.db', 'nightly.db.sha256']);
      assert.equal(integrityOf(target), 'ok');
      assert.equal(petsInFile(target).size, SEEDED + 200_000 + 1);
    } finally {
      await stop(server);
    }
  });

  test('backup refuses an existing FILE unless --force, and the database itself, through a link too, or its -wal even with it', async (t) => {
    const box = sandbox(t);
    const target = join(box.dir, 'copy.db');
    writeFileSync(target, 'an earlier file');
    await refused(['backup', target], box.env, /^petstore: .*copy\.db exists; add --force to replace it\n$/);
    assert.equal(readFileSync(target, 'utf8'), 'an earlier file', 'the refused backup left FILE as it was');
    await ok(['backup', target, '--force'], box.env);
    assert.equal(petsInFile(target).size, SEEDED);
    const link = join(box.dir, 'latest.db');
    symlinkSync(box.db, link);
    for (const own of [box.db, `${box.db}-wal`, link]) await refused(['backup', own, '--force'], box.env, /is the database itself/);
    await refused(['backup', join(box.dir, 'no', 'such', 'folder.db')], box.env, /is not an existing folder; create it first/);
    assert.deepEqual(filesIn(box.dir, 'petstore.db'), ['copy.db', 'copy.db.sha256', 'latest.db'], 'no partial file is left');
    assert.ok(lstatSync(link).isSymbolicLink());
  });

  test('--into DIR names each backup by the UTC second it began; --keep N then removes the oldest beyond N, and nothing else', async (t) => {
    const box = sandbox(t);
    const folder = join(box.dir, 'backups');
    mkdirSync(folder);
    // Not dated backups of this command: another name, a dated name without its checksum, a partial file.
    const others = ['monday.db', 'monday.db.sha256', 'petstore-20200101T000000Z.db', 'notes.txt'];
    for (const name of others) writeFileSync(join(folder, name), 'kept');
    const made: string[] = [];
    for (let i = 0; i < 4; i++) {
      const before = Date.now();
      const out = await ok(['backup', '--into', folder, '--keep', '2'], box.env);
      const name = /to (\S+\/(petstore-\d{8}T\d{6}Z\.db)) in /.exec(out.stdout)?.[2];
      assert.ok(name, out.stdout);
      const began = Date.parse(name.replace(/^petstore-(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z\.db$/, '$1-$2-$3T$4:$5:$6Z'));
      assert.ok(began >= Math.floor(before / 1000) * 1000 && began <= Date.now(), `${name} is the second it began`);
      assert.equal(petsInFile(join(folder, name)).size, SEEDED);
      made.push(name);
      if (i >= 2) assert.match(out.stdout, new RegExp(`Removed 1 older backup beyond 2: ${made[i - 2]!.replaceAll('.', '\\.')}\\.`));
      // The next backup begins in another second: names are unique.
      await sleep(Math.max(0, 1000 - (Date.now() % 1000)) + 20);
    }
    assert.deepEqual(filesIn(folder), [...others, ...made.slice(2).flatMap((n) => [n, `${n}.sha256`])].sort());
    // Without --keep, nothing is removed.
    await ok(['backup', '--into', folder], box.env);
    assert.equal(filesIn(folder).filter((n) => /^petstore-\d{8}T\d{6}Z\.db$/.test(n)).length, 4);
    await refused(['backup', '--into', join(box.dir, 'missing')], box.env, /is not an existing folder; create it first/);
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
    assert.deepEqual(filesIn(box.dir, 'petstore.db'), ['backup.db', 'backup.db.sha256'], 'no partial file is left');
    assert.equal(petsInFile(box.db).size, SEEDED + 1, 'the database is as the server left it');
  });

  test('restore refuses a corrupt file, a file that is no database, and a newer schema, even with a checksum that matches, leaving the database as it was', async (t) => {
    const box = sandbox(t);
    const good = join(box.dir, 'good.db');
    await ok(['backup', good], box.env);

    const corrupt = join(box.dir, 'corrupt.db');
    const bytes = readFileSync(good);
    bytes.fill(0x5a, Math.floor(bytes.length / 2), Math.floor(bytes.length / 2) + 8192); // two pages of the pets table
    writeFileSync(corrupt, bytes);
    sha256sum(corrupt); // its checksum matches: SQLite's check refuses it
    await refused(['restore', corrupt], box.env, /^petstore: .*corrupt\.db fails SQLite's integrity check: /);

    const text = join(box.dir, 'notes.txt');
    writeFileSync(text, 'not a database at all\n'.repeat(100));
    await refused(['restore', text, '--without-checksum'], box.env, /notes\.txt fails SQLite's integrity check: file is not a database/);

    const newer = join(box.dir, 'newer.db');
    copyFileSync(good, newer);
    const db = new DatabaseSync(newer);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
      LATEST_SQLITE_VERSION + 1,
      'from the future',
      Date.now(),
    );
    db.close();
    sha256sum(newer);
    await refused(
      ['restore', newer],
      box.env,
      new RegExp(`newer\\.db has schema version ${LATEST_SQLITE_VERSION + 1}, newer than this release's ${LATEST_SQLITE_VERSION}`),
    );

    await refused(['restore', join(box.dir, 'missing.db')], box.env, /there is no backup file at .*missing\.db/);
    const left = filesIn(box.dir, 'petstore.db');
    const expected = ['corrupt.db', 'corrupt.db.sha256', 'good.db', 'good.db.sha256', 'newer.db', 'newer.db.sha256', 'notes.txt'];
    assert.deepEqual(left, expected, 'no partial file is left');
    assert.equal(petsInFile(box.db).size, SEEDED);
  });

  /** An earlier release's backup in `dir`, one version behind, holding one pet, with a checksum sha256sum wrote. */
  function olderBackup(dir: string): string {
    const older = join(dir, 'older.db');
    const db = new DatabaseSync(older);
    db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    for (const m of SQLITE_MIGRATIONS.slice(0, -1)) {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
    }
    db.exec("INSERT INTO pets (name, category_id, status) VALUES ('old timer', 3, 'sold')");
    db.close();
    sha256sum(older);
    return older;
  }

  test('restore puts an older schema in place of no database at all, and the next start migrates it', async (t) => {
    const dir = tempDir(t);
    const older = olderBackup(dir);
    const env = { DATABASE_URL: `sqlite:${join(dir, 'fresh.db')}` };
    const restore = await ok(['restore', older], env);
    const previous = LATEST_SQLITE_VERSION - 1;
    const holds = `1 pet and 0 API keys of no known environment \\(schema version ${previous}, [\\d.]+ kB\\)`;
    assert.match(restore.stdout, new RegExp(`^Restored ${holds}`));
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

  test('with MIGRATIONS=refuse, restoring an older schema says to run petstore migrate, and starts refuse it until then', async (t) => {
    const dir = tempDir(t);
    const older = olderBackup(dir);
    const fresh = join(dir, 'fresh.db');
    const env = { DATABASE_URL: `sqlite:${fresh}`, MIGRATIONS: 'refuse' };
    const restore = await ok(['restore', older], env);
    const previous = LATEST_SQLITE_VERSION - 1;
    const versions = `from schema version ${previous} to ${LATEST_SQLITE_VERSION}`;
    assert.match(
      restore.stdout,
      new RegExp(`\\nRun petstore migrate to migrate it ${versions}: with MIGRATIONS=refuse, starts refuse it until then\\.\\n$`),
    );
    await refused(['keys', 'list'], env, new RegExp(`^petstore: the SQLite file ${fresh} is at schema version ${previous}; `));
    await ok(['migrate'], env);
    assert.match((await ok(['keys', 'list'], env)).stdout, /^No API keys\./);
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

/**
 * Waits until a process, but those named, has path open (read from /proc: this is Linux): true then,
 * or false once giveUp says so first.
 */
async function waitForOpenFile(path: string, but: number[], giveUp = () => false): Promise<boolean> {
  for (;;) {
    for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name) && !but.includes(Number(name)))) {
      try {
        for (const fd of readdirSync(`/proc/${pid}/fd`)) if (readlinkSync(`/proc/${pid}/fd/${fd}`) === path) return true;
      } catch {
        // gone, or not ours to read
      }
    }
    if (giveUp()) return false;
    await sleep(10);
  }
}

/** Writes FILE.sha256 with coreutils' sha256sum, as an operator would for a file from elsewhere. */
function sha256sum(file: string): void {
  const summed = spawnSync('sha256sum', [basename(file)], { cwd: dirname(file), encoding: 'utf8' });
  assert.equal(summed.status, 0, summed.stderr);
  writeFileSync(`${file}.sha256`, summed.stdout);
}

const modeOf = (path: string) => statSync(path).mode & 0o777;

/** A file's device and inode, which name it. */
const identity = (path: string) => `${statSync(path).dev}:${statSync(path).ino}`;

/** The command's source in a copy every user can read, removed with the test: src/ and package.json. */
function readableCli(t: TestContext): string {
  const copy = tempDir(t);
  for (const path of ['src', 'package.json']) cpSync(join(ROOT, path), join(copy, path), { recursive: true });
  chmodSync(copy, 0o755);
  for (const entry of readdirSync(copy, { recursive: true, withFileTypes: true })) {
    chmodSync(join(entry.parentPath, entry.name), entry.isDirectory() ? 0o755 : 0o644);
  }
  return join(copy, 'src', 'cli', 'main.ts');
}

const asRoot = (t: TestContext, what: string) => requireTool(t, what, process.getuid?.() === 0 ? undefined : 'it needs root');

/** A tmpfs of the test's own, mounted on a new folder and unmounted when the test ends: a device of its own. */
function volume(t: TestContext): string {
  const dir = join(tempDir(t), 'volume'); // the folder goes after the tmpfs is unmounted
  mkdirSync(dir);
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', dir], { encoding: 'utf8' });
  assert.equal(mounted.status, 0, `mount -t tmpfs: ${mounted.stderr}`);
  atEnd(t, () => spawnSync('umount', ['-l', dir]));
  return dir;
}

/** The lines of /proc/locks on the file at path (its device as MAJOR:MINOR in hex, and inode). */
function locksOn(path: string): string[] {
  const found = statSync(path, { throwIfNoEntry: false });
  if (found === undefined) return [];
  const major = (found.dev >> 8) & 0xfff;
  const minor = (found.dev & 0xff) | ((found.dev >> 12) & 0xfff00);
  const file = `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}:${found.ino}`;
  return readFileSync('/proc/locks', 'utf8')
    .split('\n')
    .filter((line) => line.split(/\s+/).includes(file));
}

/** The processes a process started (Linux). */
const childrenOf = (pid: number) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .split(' ')
    .filter((s) => s !== '')
    .map(Number);

describe('what backup and restore protect', () => {
  test('a backup of staging is refused over a production database, in words that name both, unless --across-environments staging:production', async (t) => {
    const production = sandbox(t);
    const productionKey = await keysCreateJson(production.env, '--plan', 'free');
    const keysBefore = await keysListed(production.env);
    // Staging's database has no key yet: the backup records PETSTORE_ENV's environment.
    const staging = sandbox(t);
    const stagingEnv = { ...staging.env, PETSTORE_ENV: 'staging' };
    addPets(staging.db, 1);
    const backupFile = join(staging.dir, 'staging.db');
    const made = await ok(['backup', backupFile], stagingEnv);
    assert.match(made.stdout, /^Backed up \d+ pets and 0 API keys of staging /);
    const verified = await ok(['backup', '--verify', backupFile], {});
    assert.match(verified.stdout, /^ {2}environment staging \(recorded in it\)$/m);

    const both = new RegExp(
      `^petstore: ${backupFile} is a backup of staging \\(recorded in it\\); the database at ${production.db} is production ` +
        `\\(the environment of its API keys\\): production servers accept none of its staging keys\\. ` +
        `To restore it anyway, add --across-environments staging:production\\n$`,
    );
    await refused(['restore', backupFile], production.env, both);
    await refused(['restore', backupFile, '--across-environments', 'production:staging'], production.env, /, not production:staging\n$/);
    assert.deepEqual(await keysListed(production.env), keysBefore, 'the production database is as it was');

    // A backup that records no environment (an earlier release's) is told by its keys.
    const keyed = join(staging.dir, 'keyed.db');
    await keysCreateJson(stagingEnv, '--plan', 'free');
    await ok(['backup', keyed], stagingEnv);
    const db = new DatabaseSync(keyed);
    db.exec("DELETE FROM settings WHERE name = 'environment'");
    db.close();
    sha256sum(keyed);
    await refused(
      ['restore', keyed],
      production.env,
      /keyed\.db is a backup of staging \(the environment of its API keys\); the database at .* is production/,
    );

    // A fresh path takes PETSTORE_ENV's word for what it is to be.
    const fresh = { DATABASE_URL: `sqlite:${join(production.dir, 'fresh.db')}` };
    await refused(['restore', backupFile], fresh, /is production \(PETSTORE_ENV, as there was no database\)/);
    assert.deepEqual(filesIn(production.dir), ['petstore.db'], 'nothing was left of the refused restores');
    assert.equal(petsInFile(production.db).size, SEEDED);

    const across = await ok(['restore', backupFile, '--across-environments', 'staging:production'], production.env);
    assert.match(across.stdout, /^Restored \d+ pets and 0 API keys of staging /);
    assert.match(across.stdout, /\nThe database is production's now, as recorded in it: production servers refuse its staging keys/);
    assert.equal(petsInFile(production.db).size, SEEDED + 1, "staging's pets");
    const server = await startServerProcess(production.env);
    try {
      const res = await fetch(`${server.url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${productionKey.key}` } });
      assert.equal(res.status, 401, 'the production key went with the database it was in');
    } finally {
      await stop(server);
    }
    // What the database now records: a backup of it is production's, and restores over production.
    const after = join(production.dir, 'after.db');
    await ok(['backup', after], production.env);
    await refused(
      ['restore', after, '--across-environments', 'staging:production'],
      production.env,
      /does not describe this restore; run it without\n$/,
    );
    await ok(['restore', after], production.env);
  });

  test('a database path that is a symbolic link: restore replaces the file it leads to and keeps the link', async (t) => {
    const dir = tempDir(t);
    mkdirSync(join(dir, 'volume'));
    const real = join(dir, 'volume', 'petstore.db');
    copyFileSync(template, real);
    chmodSync(real, 0o600);
    const link = join(dir, 'petstore.db');
    symlinkSync('volume/petstore.db', link);
    const env = { DATABASE_URL: `sqlite:${link}` };
    const backupFile = join(dir, 'backup.db');
    await ok(['backup', backupFile], env);
    addPets(real, 1); // what the restore takes back

    const restored = await ok(['restore', backupFile], env);
    assert.match(restored.stdout, new RegExp(`into ${real} \\(where ${link} leads\\) in `));
    assert.ok(lstatSync(link).isSymbolicLink(), 'the link is still a link');
    assert.equal(readlinkSync(link), 'volume/petstore.db', 'to the same place');
    assert.equal(petsInFile(real).size, SEEDED, 'the file it leads to holds the backup');
    assert.equal(modeOf(real), 0o600);
    assert.deepEqual(filesIn(dir), ['backup.db', 'backup.db.sha256', 'petstore.db', 'volume']);
    assert.deepEqual(filesIn(join(dir, 'volume')), ['petstore.db'], 'nothing of the old file is left beside the new one');
    await keysCreate(env, '--plan', 'free'); // later writes land in the volume
    const db = new DatabaseSync(link); // through the link, as a server opens it
    assert.deepEqual({ ...db.prepare('SELECT count(*) AS n FROM api_keys').get() }, { n: 1 });
    assert.deepEqual(filesIn(join(dir, 'volume')), ['petstore.db', 'petstore.db-shm', 'petstore.db-wal'], "SQLite's -wal is in the volume");
    db.close();
  });

  test('restore into a path with no database locks it first: a keys create that opens the path meanwhile waits, then writes into the restored file', async (t) => {
    const missing = spawnSync('strace', ['-V']).error === undefined ? undefined : 'strace is not installed (apt-get install -y strace)';
    if (!requireTool(t, 'the lock of a restore into an empty path', missing)) return;
    const box = sandbox(t);
    const backupFile = join(box.dir, 'backup.db');
    await ok(['backup', backupFile], box.env);
    const folder = join(box.dir, 'fresh');
    mkdirSync(folder);
    const fresh = join(folder, 'petstore.db');
    const env = { DATABASE_URL: `sqlite:${fresh}` };

    // strace holds the restore 2 s at its rename, which puts the backup in place; once the path is
    // seen locked, strace itself is stopped, so that the restore waits there until the test goes on.
    const { tracer, output, restored } = restoreUnderStrace(backupFile, env);
    while (locksOn(fresh).length === 0) {
      if (tracer.exitCode !== null) assert.fail(`the restore never held a lock on ${fresh}: ${output()}`);
      await sleep(2);
    }
    const locked = identity(fresh);
    tracer.kill('SIGSTOP');
    let created: Promise<CliResult>;
    try {
      created = run(['keys', 'create', '--plan', 'free', '--json'], env);
      let done = false;
      void created.finally(() => (done = true));
      // Once the keys create has the locked file open, it waits for the lock (refused after 5 s).
      const restorer = childrenOf(tracer.pid!);
      const opened = await waitForOpenFile(fresh, [process.pid, tracer.pid!, ...restorer], () => done);
      assert.equal(identity(fresh), locked, 'the path still names the file the restore locked');
      console.log(`# keys create ${opened ? 'opened the locked file' : 'ended before it was seen with the file open'}`);
    } finally {
      tracer.kill('SIGCONT');
    }
    assert.equal(await restored, 0, output());
    assert.match(output(), /^Restored 20000 pets and 0 API keys of production /);
    const keys = await created;
    // Read before the test opens the file itself (a read-only connection leaves a -wal and a -shm).
    assert.deepEqual(filesIn(folder), ['petstore.db'], 'no -wal or -shm of another file beside it');
    assert.equal(integrityOf(fresh), 'ok');
    assert.equal(petsInFile(fresh).size, SEEDED, "the backup's pets, none overlaid");
    const db = new DatabaseSync(fresh, { readOnly: true });
    const stored = (db.prepare('SELECT id FROM api_keys').all() as { id: string }[]).map((row) => row.id);
    db.close();
    if (keys.code === 0) {
      assert.deepEqual(stored, [(JSON.parse(lastLine(keys.stdout)) as CreatedKey).id], 'the key is in the restored file');
      console.log('# keys create waited for the lock, then wrote into the restored file');
    } else {
      assert.match(keys.stderr, /database is locked/, explain(['keys', 'create'], keys));
      assert.deepEqual(stored, []);
    }
  });

  test('a backup is no more readable than the database; a restore keeps the mode of the database it replaces, and makes 0600 where there was none', async (t) => {
    const box = sandbox(t);
    chmodSync(box.db, 0o600);
    const backupFile = join(box.dir, 'backup.db');
    await ok(['backup', backupFile], box.env);
    assert.equal(modeOf(backupFile), 0o600);
    assert.equal(modeOf(`${backupFile}.sha256`), 0o600);
    chmodSync(backupFile, 0o644); // a copy made readable by all, as cp without -p under a loose umask does
    chmodSync(box.db, 0o640); // the database's mode, neither the backup's nor restore's own
    await ok(['restore', backupFile], box.env);
    assert.equal(modeOf(box.db), 0o640);
    const fresh = join(box.dir, 'fresh.db');
    await ok(['restore', backupFile], { DATABASE_URL: `sqlite:${fresh}` });
    assert.equal(modeOf(fresh), 0o600);
    // Readable by its group, which is the backup's too.
    await ok(['backup', join(box.dir, 'group.db')], box.env);
    assert.equal(modeOf(join(box.dir, 'group.db')), 0o640);
  });

  test("run as root, a restore keeps the database's owner, or gives the folder's where there was none; a backup in another group loses the group's bits", async (t) => {
    if (!asRoot(t, 'the owner test')) return;
    const nobody = 65534;
    const box = sandbox(t);
    chownSync(box.db, nobody, nobody);
    chmodSync(box.db, 0o640);
    const backupFile = join(box.dir, 'backup.db');
    await ok(['backup', backupFile], box.env);
    assert.deepEqual(
      [statSync(backupFile).uid, statSync(backupFile).gid, modeOf(backupFile)],
      [0, 0, 0o600],
      "root's group is not the database's",
    );
    await ok(['restore', backupFile], box.env);
    assert.deepEqual([statSync(box.db).uid, statSync(box.db).gid, modeOf(box.db)], [nobody, nobody, 0o640]);

    const folder = join(box.dir, 'service');
    mkdirSync(folder);
    chownSync(folder, nobody, nobody);
    const fresh = join(folder, 'petstore.db');
    await ok(['restore', backupFile], { DATABASE_URL: `sqlite:${fresh}` });
    assert.deepEqual([statSync(fresh).uid, statSync(fresh).gid, modeOf(fresh)], [nobody, nobody, 0o600]);

    // Run as another user, restore cannot give the file root's ownership: it refuses, replacing nothing.
    const shared = tempDir(t);
    chmodSync(shared, 0o777);
    const rootsDb = join(shared, 'petstore.db');
    copyFileSync(template, rootsDb);
    chmodSync(rootsDb, 0o666);
    const readable = join(shared, 'backup.db');
    copyFileSync(backupFile, readable);
    copyFileSync(`${backupFile}.sha256`, `${readable}.sha256`);
    for (const file of [readable, `${readable}.sha256`]) chmodSync(file, 0o644);
    const before = identity(rootsDb);
    // The node binary may sit where that user cannot reach it: the process drops to it once started.
    // And so may the checkout (a root user's home, a mktemp -d folder): it runs a copy of the command
    // that user can read (restore loads nothing from node_modules).
    const drop = `process.setgid(${nobody}); process.setuid(${nobody}); process.argv.splice(1, 0, 'petstore'); await import(${JSON.stringify(readableCli(t))});`;
    const asNobody = spawnSync(process.execPath, ['--input-type=module', '-e', drop, 'restore', readable], {
      cwd: shared,
      env: cliEnv({ DATABASE_URL: `sqlite:${rootsDb}` }),
      encoding: 'utf8',
    });
    assert.equal(asNobody.status, 1, asNobody.stderr);
    assert.equal(
      asNobody.stderr,
      `petstore: the database at ${rootsDb} belongs to user 0 and group 0, which this user (${nobody}) cannot give the restored file: run petstore restore as that user or as root\n`,
    );
    assert.equal(identity(rootsDb), before, 'the database was not replaced');
    assert.deepEqual(filesIn(shared, 'petstore.db-wal', 'petstore.db-shm'), ['backup.db', 'backup.db.sha256', 'petstore.db']);
  });

  test('files on two volumes with the same inode number are not taken for one: a backup onto one, a restore from one', async (t) => {
    if (!asRoot(t, 'the test of two volumes (tmpfs mounts)')) return;
    const [a, b] = [volume(t), volume(t)];
    const database = join(a, 'petstore.db');
    copyFileSync(template, database); // the first file of each volume: the same inode number
    const earlier = join(b, 'nightly.db');
    writeFileSync(earlier, 'an earlier file');
    assert.equal(statSync(database).ino, statSync(earlier).ino, 'the same inode number');
    const env = { DATABASE_URL: `sqlite:${database}` };
    await ok(['backup', earlier, '--force'], env);
    assert.equal(petsInFile(earlier).size, SEEDED);

    const [c, d] = [volume(t), volume(t)];
    const backupFile = join(c, 'backup.db');
    copyFileSync(earlier, backupFile);
    copyFileSync(`${earlier}.sha256`, `${backupFile}.sha256`);
    const other = join(d, 'petstore.db');
    copyFileSync(template, other);
    addPets(other, 1);
    assert.equal(statSync(backupFile).ino, statSync(other).ino, 'the same inode number');
    await ok(['restore', backupFile], { DATABASE_URL: `sqlite:${other}` });
    assert.equal(petsInFile(other).size, SEEDED);
  });

  test("a backup with 12 bytes of a pet's name changed passes SQLite's check, but restore and --verify refuse it, and nothing is replaced", async (t) => {
    const box = sandbox(t);
    const backupFile = join(box.dir, 'backup.db');
    await ok(['backup', backupFile], box.env);
    const good = await ok(['backup', '--verify', backupFile], {});
    assert.match(good.stdout, /^ {2}checksum {4}SHA-256 [0-9a-f]{64}, as .*backup\.db\.sha256 records$/m);
    assert.match(good.stdout, /^ {2}integrity {3}ok/m);
    assert.match(good.stdout, new RegExp(`^ {2}schema {6}version ${LATEST_SQLITE_VERSION} `, 'm'));
    assert.match(good.stdout, /^ {2}environment production \(recorded in it\)$/m);
    assert.match(good.stdout, /^ {2}holds {7}20000 pets and 0 API keys, [\d.]+ MB$/m);
    assert.match(good.stdout, /\nVerified: petstore restore accepts it over a database of production\.\n$/);
    const summed = spawnSync('sha256sum', ['-c', 'backup.db.sha256'], { cwd: box.dir, encoding: 'utf8' });
    assert.equal(summed.stdout, 'backup.db: OK\n', 'sha256sum -c checks it too');

    const bytes = readFileSync(backupFile);
    const at = bytes.indexOf('seeded 12345');
    assert.ok(at > 0);
    bytes.write('fiddled name', at);
    writeFileSync(backupFile, bytes);
    assert.equal(integrityOf(backupFile), 'ok', "SQLite's integrity check sees nothing");
    const before = identity(box.db);

    await refused(
      ['restore', backupFile],
      box.env,
      /^petstore: .*backup\.db changed after it was written \(SHA-256 [0-9a-f]{64}, not the [0-9a-f]{64} that .*backup\.db\.sha256 records\): restore another backup\n$/,
    );
    await refused(['restore', backupFile, '--without-checksum'], box.env, /changed after it was written/);
    const changed = await run(['backup', '--verify', backupFile], {});
    assert.equal(changed.code, 1, explain(['backup', '--verify'], changed));
    assert.match(changed.stdout, /^ {2}checksum {4}CHANGED: its SHA-256 is [0-9a-f]{64}, not the [0-9a-f]{64} that .* records$/m);
    assert.match(changed.stdout, /^ {2}integrity {3}ok/m);
    assert.match(changed.stderr, /^petstore: .*backup\.db failed verification: checksum CHANGED: its SHA-256 is /);
    assert.equal(identity(box.db), before, 'the database was not replaced');
    assert.deepEqual(filesIn(box.dir), ['backup.db', 'backup.db.sha256', 'petstore.db'], 'no partial file is left');
    assert.equal(petsInFile(box.db).get(12345)?.name, 'seeded 12345');
  });

  test('a backup without its checksum file is refused by restore unless --without-checksum, and --verify says so; a renamed pair still checks', async (t) => {
    const box = sandbox(t);
    const backupFile = join(box.dir, 'backup.db');
    await ok(['backup', backupFile], box.env);
    // Renamed together, as an operator's rotation might: the name inside the checksum file is not read.
    const renamed = join(box.dir, 'monday.db');
    renameSync(backupFile, renamed);
    renameSync(`${backupFile}.sha256`, `${renamed}.sha256`);
    await ok(['backup', '--verify', renamed], {});

    rmSync(`${renamed}.sha256`);
    await refused(
      ['restore', renamed],
      box.env,
      /^petstore: .*monday\.db has no checksum beside it \(.*monday\.db\.sha256\), so a change to its bytes cannot be seen: copy that file with it, or add --without-checksum to restore it unchecked\n$/,
    );
    const unverified = await run(['backup', '--verify', renamed], {});
    assert.equal(unverified.code, 1);
    assert.match(unverified.stdout, /^ {2}checksum {4}none: there is no .*monday\.db\.sha256/m);
    writeFileSync(`${renamed}.sha256`, 'not a checksum\n');
    await refused(['restore', renamed], box.env, /monday\.db\.sha256 is not a checksum file: it should be one line as sha256sum writes it/);
    rmSync(`${renamed}.sha256`);
    const unchecked = await ok(['restore', renamed, '--without-checksum'], box.env);
    assert.match(unchecked.stdout, /\nIt had no checksum beside it: its bytes were restored unchecked \(--without-checksum\)\.\n/);
  });
});

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
    assert.match(top.stdout, /^ {2}petstore backup FILE \[--force \| --verify\] \| --into DIR \[--keep N\]$/m);
    assert.match(top.stdout, /^ {2}petstore restore FILE \[--across-environments FROM:TO\] \[--without-checksum\]$/m);
    const backup = await ok(['backup', '--help'], env);
    assert.match(backup.stdout, /^Usage: petstore backup FILE \[--force \| --verify\] \| --into DIR \[--keep N\]\n/);
    assert.match(backup.stdout, /--into DIR +Instead of FILE: write DIR\/petstore-YYYYMMDDTHHMMSSZ\.db/);
    assert.match(backup.stdout, /--keep N +With --into: then remove the oldest such backups in DIR beyond the newest N/);
    assert.match(backup.stdout, /--force .*Replace FILE and FILE\.sha256/);
    assert.match(backup.stdout, /--verify .*Check FILE, a backup, instead of writing one/);
    assert.match(backup.stdout, /SHA-256 is written first to FILE\.sha256/);
    assert.match(backup.stdout, /pg_dump/);
    const restore = await ok(['help', 'restore'], env);
    assert.match(restore.stdout, /^Usage: petstore restore FILE \[--across-environments FROM:TO\] \[--without-checksum\]\n/);
    assert.match(restore.stdout, /--across-environments FROM:TO +Restore a backup of environment FROM over a database of TO/);
    assert.match(restore.stdout, /--without-checksum +Restore a FILE that has no FILE\.sha256 beside it/);
    assert.match(restore.stdout, /integrity check/);
    const verify = await ok(['backup', '--verify', '--help'], env);
    assert.equal(verify.stdout, backup.stdout);
    for (const [args, message] of [
      [['backup', 'x.db', '--force', '--verify'], 'petstore: backup takes --force or --verify, not both; see petstore backup --help\n'],
      [['backup', 'x.db', '--into', 'backups'], 'petstore: backup takes FILE or --into, not both; see petstore backup --help\n'],
      [['backup', 'x.db', '--keep', '3'], 'petstore: --keep goes with --into DIR; see petstore backup --help\n'],
      [
        ['backup', '--into', 'backups', '--keep', '0'],
        'petstore: --keep takes how many backups to keep, from 1, not "0"; see petstore backup --help\n',
      ],
      [['backup', '--into', 'backups', '--keep', 'all'], /^petstore: --keep takes how many backups to keep, from 1, not "all"/],
      [['backup', '--into', 'backups', '--force'], /^petstore: --into names a new file, which --force has nothing to replace in/],
      [['backup', '--into', 'backups', '--verify'], /^petstore: --verify checks a FILE: it does not go with --into/],
      [
        ['restore', 'x.db', '--across-environments', 'staging'],
        /^petstore: --across-environments takes FROM:TO, .* like staging:production; /,
      ],
      [['restore', 'x.db', '--across-environments', 'staging:staging'], /^petstore: --across-environments takes FROM:TO/],
      [['restore', 'x.db', '--across-environments', 'staging:qa'], /^petstore: --across-environments takes FROM:TO/],
    ] as const) {
      const wrong = await run([...args], env);
      assert.equal(wrong.code, 2, explain([...args], wrong));
      if (typeof message === 'string') assert.equal(wrong.stderr, message);
      else assert.match(wrong.stderr, message);
    }
    const missing = await run(['restore'], env);
    assert.equal(missing.code, 2, explain(['restore'], missing));
    assert.equal(missing.stderr, 'petstore: restore needs a file; see petstore restore --help\n');
  });
});
