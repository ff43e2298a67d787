/**
 * `petstore restore` on SQLite, beside backup.test.ts: a checksum file in upper-case hex (which
 * sha256sum -c accepts too) checks an unchanged backup, for restore and for --verify; and while a
 * restore replaces a database in rollback-journal mode (as a restore leaves it until a server opens
 * it), its exclusive lock keeps every other connection out of the old file, readers too.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import { restoreUnderStrace } from '../support/held-restore.ts';
import { explain, runCli, type EnvOverrides } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';
import { requireTool } from '../support/tools.ts';

/** A migrated database with a pet, and a backup of it made by `petstore backup`, in a folder of the test's own. */
async function withBackup(t: TestContext): Promise<{ db: string; backup: string; env: EnvOverrides }> {
  const dir = tempDir(t);
  const db = join(dir, 'petstore.db');
  const store = openSqliteStore({ path: db, synchronous: 'normal' });
  await store.createPet({ name: 'Rex', categoryId: 1n, status: 'available' });
  await store.close();
  const env = { DATABASE_URL: `sqlite:${db}` };
  const backup = join(dir, 'backup.db');
  await ok(['backup', backup], env);
  return { db, backup, env };
}

async function ok(args: string[], env: EnvOverrides): Promise<string> {
  const result = await runCli(args, env, { timeoutMs: 60_000 });
  assert.equal(result.code, 0, explain(args, result));
  return result.stdout;
}

/** A SQLite file's header says which journal it keeps: 1 a rollback journal, 2 a write-ahead log. */
const journalOf = (path: string) =>
  readFileSync(path)
    .subarray(18, 20)
    .equals(Buffer.from([2, 2]))
    ? 'wal'
    : 'rollback';

/** The state letter of a process (Linux): `t` while it is stopped under its tracer. */
const stateOf = (pid: number) => /\) (\S) /.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1];

/** What a process runs, or undefined once it has ended (Linux). */
const commandOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0];
  } catch {
    return undefined;
  }
};

/** x86-64's rename(2), which libuv's rename calls: a stop at another call (a thread's clone) is not the rename. */
const RENAME = '82';

/** True while the process is stopped by its tracer on entering rename(2). */
const heldAtRename = (pid: number) => stateOf(pid) === 't' && readFileSync(`/proc/${pid}/syscall`, 'utf8').split(' ')[0] === RENAME;

/** The processes a process started (Linux). */
const childrenOf = (pid: number) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .split(' ')
    .filter((s) => s !== '')
    .map(Number);

/** What another connection gets when it reads the file, or writes to it, without waiting for a lock. */
function tryOther(path: string, sql: string): string {
  const db = new DatabaseSync(path);
  try {
    db.exec('PRAGMA busy_timeout = 0');
    db.exec(sql);
    return 'done';
  } catch (err) {
    return (err as Error).message;
  } finally {
    db.close();
  }
}

describe('restore', () => {
  test('a checksum file in upper-case hex checks an unchanged backup: restore and --verify accept it', async (t) => {
    const { backup, env } = await withBackup(t);
    const [digest, ...rest] = readFileSync(`${backup}.sha256`, 'utf8').split(' ');
    writeFileSync(`${backup}.sha256`, [digest!.toUpperCase(), ...rest].join(' '));
    assert.match(readFileSync(`${backup}.sha256`, 'utf8'), /^[0-9A-F]{64} {2}backup\.db\n$/);
    assert.match(await ok(['backup', '--verify', backup], {}), /^ {2}checksum {4}SHA-256 /m);
    assert.doesNotMatch(await ok(['restore', backup], env), /unchecked/);
  });

  test('a backup reached through a symbolic link is checked against the checksum beside the file it leads to', async (t) => {
    const { backup, env } = await withBackup(t);
    const link = join(tempDir(t), 'latest.db');
    symlinkSync(backup, link);
    assert.match(await ok(['backup', '--verify', link], {}), /^ {2}checksum {4}SHA-256 /m);
    assert.doesNotMatch(await ok(['restore', link], env), /unchecked/);
  });

  test('a refused restore leaves the database it would have replaced as it was, byte for byte, with nothing beside it', async (t) => {
    const { backup } = await withBackup(t);
    const folder = tempDir(t);
    const staging = join(folder, 'staging.db');
    const env = { DATABASE_URL: `sqlite:${staging}`, PETSTORE_ENV: 'staging' };
    await ok(['keys', 'create', '--plan', 'free'], env);
    assert.equal(journalOf(staging), 'wal');
    const before = readFileSync(staging);
    const refused = await runCli(['restore', backup], env, { timeoutMs: 60_000 });
    assert.equal(refused.code, 1, explain(['restore', backup], refused));
    assert.match(refused.stderr, /is a backup of production .* is staging/);
    assert.ok(readFileSync(staging).equals(before), 'the same bytes, still in WAL mode');
    assert.deepEqual(readdirSync(folder), ['staging.db']);
  });

  // Out of WAL mode nothing but the lock itself keeps others out: no connection holds a shared lock.
  test('while a restore replaces a database in rollback-journal mode, no other connection reads or writes the old file', async (t) => {
    const missing = spawnSync('strace', ['-V']).error === undefined ? undefined : 'strace is not installed: apt-get install -y strace';
    if (!requireTool(t, 'a restore held at its rename', missing)) return;
    const { db, backup, env } = await withBackup(t);
    await ok(['restore', backup], env);
    assert.equal(journalOf(db), 'rollback', 'as a restore leaves it, until a server opens it');

    // strace holds the restore at its rename, which replaces the file; stopped itself, it keeps it there.
    const { tracer, output, restored } = restoreUnderStrace(backup, env);
    let restorer: number | undefined;
    while (restorer === undefined || !heldAtRename(restorer)) {
      if (tracer.exitCode !== null) assert.fail(`the restore ended before it was seen at its rename: ${output()}`);
      // strace starts short-lived children of its own before the one that runs node.
      restorer = childrenOf(tracer.pid!).find((pid) => commandOf(pid) === process.execPath);
      await sleep(5);
    }
    tracer.kill('SIGSTOP');
    let read: string, written: string;
    try {
      // At its rename, stopped; and still there, since strace is stopped too.
      read = tryOther(db, 'SELECT count(*) FROM pets');
      written = tryOther(db, "INSERT INTO pets (name, category_id, status) VALUES ('late', 1, 'sold')");
      assert.ok(heldAtRename(restorer), 'the restore was still held at its rename');
    } finally {
      tracer.kill('SIGCONT');
    }
    assert.equal(await restored, 0, output());
    assert.equal(read, 'database is locked', 'a reader is kept out');
    assert.equal(written, 'database is locked', 'a writer is kept out');
  });
});
