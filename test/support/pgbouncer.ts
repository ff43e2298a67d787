/**
 * A PgBouncer of the test run's own between the tests and PostgreSQL: Debian's package, in transaction
 * pooling mode, every other setting at its default (so startup parameters it does not know are
 * refused, and prepared statements are not carried between server connections). It runs in the
 * foreground as a child process and is stopped by stop(); it logs to a file, never to a pipe, so a
 * parent blocked in spawnSync (scripts/run-tests.ts) cannot stall it. PgBouncer refuses to run as root,
 * so under root it runs as the postgres system user, whom the folder with its settings is handed to.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, closeSync, existsSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './processes.ts';
import { killAtExit, tempDir } from './temp.ts';

export const PGBOUNCER = '/usr/sbin/pgbouncer';

export function pgbouncerInstalled(): boolean {
  return spawnSync(PGBOUNCER, ['--version']).status === 0;
}

export interface Pgbouncer {
  /** `postgresUrl` with its host and port replaced by PgBouncer's. */
  url: string;
  port: number;
  /** What PgBouncer printed, for a failure's message. */
  output(): string;
  stop(): Promise<void>;
}

/** The uid and gid of a system user, from the passwd database. */
function account(user: string): { uid: number; gid: number } {
  const ids = (flag: string) => Number(spawnSync('id', [flag, user], { encoding: 'utf8' }).stdout.trim());
  return { uid: ids('-u'), gid: ids('-g') };
}

async function listening(port: number, child: ChildProcess, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline && child.exitCode === null) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return true;
    await sleep(100);
  }
  return false;
}

/** Starts PgBouncer in front of the PostgreSQL that `postgresUrl` names (trust authentication, any database). */
export async function startPgbouncer(postgresUrl: string): Promise<Pgbouncer> {
  const upstream = new URL(postgresUrl);
  const user = decodeURIComponent(upstream.username) || 'postgres';
  const port = await freePort();
  const dir = tempDir(); // removed by stop(), or when the process exits
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${upstream.hostname} port=${upstream.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      '',
    ].join('\n'),
  );
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? account('postgres') : undefined;
  if (owner) {
    chmodSync(dir, 0o755);
    for (const file of ['', 'userlist.txt', 'pgbouncer.ini']) chownSync(join(dir, file), owner.uid, owner.gid);
  }
  // What it says before its log file is open (a bad setting) goes to stderr, also a file.
  const stderr = openSync(join(dir, 'stderr.txt'), 'w');
  const child = spawn(PGBOUNCER, [join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', stderr], ...owner });
  killAtExit(child);
  closeSync(stderr);
  const output = () =>
    ['stderr.txt', 'pgbouncer.log']
      .map((f) => join(dir, f))
      .filter((f) => existsSync(f))
      .map((f) => readFileSync(f, 'utf8'))
      .join('');
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      // SIGINT: PgBouncer's "safe shutdown" waits for clients; SIGTERM closes at once, which a test's end wants.
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  if (!(await listening(port, child, 10_000))) {
    const printed = output();
    await stop();
    throw new Error(`PgBouncer did not start:\n${printed}`);
  }
  const url = new URL(postgresUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return { url: url.toString(), port, output, stop };
}
