/**
 * The gauges the alerts on resources read (src/resource-metrics.ts), from a real server's /metrics: the
 * SQLite database's and WAL's sizes as the files have them, the room on their file system as statfs
 * gives it, the newest dated backup in BACKUP_DIR (0 before the first, then the second its name holds),
 * through a database path that is a link to another volume, the WAL and the volume the link leads to;
 * the memory limit of a cgroup the server runs in (a memory cgroup of the test's own, as root), and on
 * PostgreSQL none of the SQLite gauges, whose 0 would read as a full disk.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmdirSync, statfsSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createTestDatabase, requirePostgres } from '../support/engines.ts';
import { CLI, freePort, keysCreate, runCli, startServerCommand, startServerProcess } from '../support/processes.ts';
import { atEnd, tempDir } from '../support/temp.ts';
import { requireTool } from '../support/tools.ts';

/** Every sample of /metrics, by its series as written (`name{labels}`). */
async function samples(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\w+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) found.set(m[1]!, Number(m[2]));
  }
  return found;
}

test('on SQLite: the database and WAL sizes, the room on their file system, and the newest backup of BACKUP_DIR', async (t) => {
  const dir = tempDir(t);
  const db = join(dir, 'petstore.db');
  const backups = join(dir, 'backups');
  mkdirSync(backups);
  const metricsPort = await freePort();
  const env = { DATABASE_URL: `sqlite:${db}`, METRICS_PORT: String(metricsPort), BACKUP_DIR: backups };
  const key = await keysCreate(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000');
  const server = await startServerProcess(env, { owner: t });
  for (let i = 0; i < 50; i++) {
    const res = await fetch(`${server.url}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `pet-${i}`.padEnd(60, 'x'), categoryId: 1 }),
    });
    assert.equal(res.status, 201);
  }

  const before = await samples(metricsPort);
  assert.equal(before.get('petstore_sqlite_file_bytes{file="database"}'), statSync(db).size);
  assert.equal(before.get('petstore_sqlite_file_bytes{file="wal"}'), statSync(`${db}-wal`).size);
  assert.ok(statSync(`${db}-wal`).size > 0, 'the creates are in the WAL');
  const fs = statfsSync(dir);
  assert.equal(before.get('petstore_sqlite_filesystem_size_bytes'), fs.blocks * fs.bsize);
  const available = before.get('petstore_sqlite_filesystem_available_bytes')!;
  assert.ok(Math.abs(available - fs.bavail * fs.bsize) < 64 << 20, `available ${available} against statfs ${fs.bavail * fs.bsize}`);
  assert.equal(before.get('petstore_backup_last_success_timestamp_seconds'), 0, 'no backup yet');
  const limit = before.get('petstore_memory_limit_bytes')!;
  assert.ok(limit > 0 && limit <= totalmem(), `memory limit ${limit}`);

  // A dated name without its checksum counts for nothing, nor one dated years ahead (a clock far off named it).
  writeFileSync(join(backups, 'petstore-29991231T235959Z.db'), 'not a backup: no checksum beside it');
  writeFileSync(join(backups, 'petstore-29990101T000000Z.db'), 'dated by a clock far ahead');
  writeFileSync(join(backups, 'petstore-29990101T000000Z.db.sha256'), 'its checksum');
  const began = Math.floor(Date.now() / 1000);
  const made = await runCli(['backup', '--into', backups], env);
  assert.equal(made.code, 0, made.stderr);
  const newest = (await samples(metricsPort)).get('petstore_backup_last_success_timestamp_seconds')!;
  assert.ok(newest >= began && newest <= Date.now() / 1000, `the newest backup began at ${newest}, the command at ${began}`);
  assert.match(made.stdout, new RegExp(`petstore-${new Date(newest * 1000).toISOString().replace(/[-:]/g, '').replace('.000', '')}`));
});

test('a database path that is a link to another volume: its WAL and that volume are measured', async (t) => {
  if (!requireTool(t, 'the gauges of a linked database on a tmpfs', process.getuid?.() === 0 ? undefined : 'it needs root to mount'))
    return;
  const dir = tempDir(t);
  const volume = join(dir, 'volume'); // the folder goes after the tmpfs is unmounted
  mkdirSync(volume);
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=48m', 'tmpfs', volume], { encoding: 'utf8' });
  assert.equal(mounted.status, 0, `mount -t tmpfs: ${mounted.stderr}`);
  atEnd(t, () => spawnSync('umount', ['-l', volume]));
  const link = join(dir, 'petstore.db');
  symlinkSync(join(volume, 'petstore.db'), link);
  const metricsPort = await freePort();
  const env = { DATABASE_URL: `sqlite:${link}`, METRICS_PORT: String(metricsPort) };
  const key = await keysCreate(env, '--plan', 'enterprise', '--rpm', '100000', '--rpd', '1000000');
  const server = await startServerProcess(env, { owner: t });
  const created = await fetch(`${server.url}/v1/pets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'linked', categoryId: 1 }),
  });
  assert.equal(created.status, 201);
  const seen = await samples(metricsPort);
  assert.equal(seen.get('petstore_sqlite_filesystem_size_bytes'), 48 << 20, "the volume's size, not the link's folder's");
  assert.ok(statSync(join(volume, 'petstore.db-wal')).size > 0, 'the WAL is beside the file the link leads to');
  assert.equal(seen.get('petstore_sqlite_file_bytes{file="wal"}'), statSync(join(volume, 'petstore.db-wal')).size);
});

test('in a memory cgroup of 512 MiB, petstore_memory_limit_bytes is its limit', async (t) => {
  const controller = '/sys/fs/cgroup/memory';
  const v2 = '/sys/fs/cgroup/cgroup.controllers';
  const why =
    process.getuid?.() !== 0
      ? 'it needs root to make a cgroup'
      : existsSync(`${controller}/cgroup.procs`) || existsSync(v2)
        ? undefined
        : 'no memory cgroup controller is mounted';
  if (!requireTool(t, 'the memory limit of a cgroup', why)) return;
  const limit = 512 * 1024 * 1024;
  const group = existsSync(v2) ? `/sys/fs/cgroup/petstore-test-${process.pid}` : `${controller}/petstore-test-${process.pid}`;
  mkdirSync(group);
  t.after(() => rmdirSync(group));
  writeFileSync(join(group, existsSync(v2) ? 'memory.max' : 'memory.limit_in_bytes'), String(limit));
  const dir = tempDir(t);
  const metricsPort = await freePort();
  const port = await freePort();
  const env = {
    DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`,
    METRICS_PORT: String(metricsPort),
    HOST: '127.0.0.1',
    PORT: String(port),
  };
  // The shell joins the cgroup, then becomes the server: the server runs in it from its first instruction.
  const server = await startServerCommand(
    '/bin/sh',
    ['-c', `echo $$ > ${group}/cgroup.procs && exec "$0" "$1" serve`, process.execPath, CLI],
    env,
    `http://127.0.0.1:${port}`,
    { owner: t },
  );
  assert.equal((await samples(metricsPort)).get('petstore_memory_limit_bytes'), limit);
  const inGroup = execFileSync('cat', [`/proc/${server.child.pid}/cgroup`], { encoding: 'utf8' });
  assert.match(inGroup, new RegExp(`petstore-test-${process.pid}`));
  server.child.kill('SIGTERM');
  await server.exited;
});

test('on PostgreSQL: no SQLite file gauge, no file-system room, no backup age', async (t) => {
  if (!requirePostgres(t, 'the resource gauges on PostgreSQL')) return;
  const database = await createTestDatabase(t);
  const metricsPort = await freePort();
  await startServerProcess({ DATABASE_URL: database.url, METRICS_PORT: String(metricsPort), BACKUP_DIR: tempDir(t) }, { owner: t });
  const names = [...(await samples(metricsPort)).keys()];
  assert.deepEqual(
    names.filter((n) => /^petstore_(sqlite|backup)_/.test(n)),
    [],
  );
  assert.ok(names.includes('petstore_memory_limit_bytes'));
});
