/**
 * A server process run under Debian's strace, from its exec to its exit, for the deployment tests
 * that hold a shipped unit or manifest to what the server really does: the system calls it makes
 * (a seccomp filter), the socket families it opens, and the files it creates, writes or removes (a
 * read-only file system). Without strace the test is skipped loudly, and fails under CI=true.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startServerCommand, type EnvOverrides, type ServerProcess, type StartOptions } from './processes.ts';
import { tempDir } from './temp.ts';

export interface ServerTrace {
  /** Every system call the process or any of its threads made, by name. */
  syscalls: ReadonlySet<string>;
  /** The address families of the sockets it opened (`AF_INET`, ...). */
  socketFamilies: ReadonlySet<string>;
  /** Absolute paths it created, opened for writing, truncated, renamed or removed, by calls that succeeded. */
  written: readonly string[];
}

export interface TracedServer {
  server: ServerProcess;
  /** Waits for the process to exit (stop it first), then reads its trace. */
  trace(): Promise<ServerTrace>;
}

/** False (with the test skipped, or failed under CI=true) when strace is not installed. */
export function stracePresent(t: TestContext): boolean {
  if (spawnSync('strace', ['-V']).error === undefined) return true;
  console.log('#'.repeat(70) + '\n# SKIPPED: the trace of a server needs strace (apt-get install -y strace)\n' + '#'.repeat(70));
  if (process.env.CI === 'true') assert.fail('CI=true needs strace');
  t.skip('no strace');
  return false;
}

/**
 * `file args` started as startServerCommand starts it, traced: strace runs as a detached grandchild
 * (-D), so the process handed back, signalled and awaited is the server itself, and writes one
 * file per thread (-ff), so that no call is split across lines.
 */
export async function startTracedServer(
  t: TestContext,
  file: string,
  args: string[],
  env: EnvOverrides,
  url: string,
  options: StartOptions & { cwd: string },
): Promise<TracedServer> {
  const dir = tempDir(t);
  const prefix = join(dir, 'trace');
  const server = await startServerCommand('strace', ['-D', '-ff', '-q', '-o', prefix, file, ...args], env, url, { owner: t, ...options });
  return {
    server,
    async trace() {
      const pid = server.child.pid!;
      await server.exited;
      // strace writes the exit last, just after the process is gone.
      const main = `${prefix}.${pid}`;
      for (let tries = 0; !(existsSync(main) && readFileSync(main, 'utf8').includes('+++ exited with')); tries++) {
        assert.ok(tries < 100, `strace finished ${main}`);
        await sleep(50);
      }
      const threads = readdirSync(dir).map((name) => readFileSync(join(dir, name), 'utf8'));
      return parseTrace(threads, options.cwd);
    },
  };
}

/** Calls that create, write, truncate, rename or remove what their path names. */
const PATH_WRITES: Readonly<Record<string, 'always' | 'flags'>> = {
  open: 'flags',
  openat: 'flags',
  creat: 'always',
  mkdir: 'always',
  mkdirat: 'always',
  unlink: 'always',
  unlinkat: 'always',
  rmdir: 'always',
  rename: 'always',
  renameat: 'always',
  renameat2: 'always',
  truncate: 'always',
  link: 'always',
  linkat: 'always',
  symlink: 'always',
  symlinkat: 'always',
  chmod: 'always',
  fchmodat: 'always',
  chown: 'always',
  fchownat: 'always',
};

function parseTrace(texts: readonly string[], cwd: string): ServerTrace {
  const syscalls = new Set<string>();
  const socketFamilies = new Set<string>();
  const written: string[] = [];
  for (const line of texts.flatMap((text) => text.split('\n'))) {
    const call = /^([a-z0-9_]+)\((.*)\) += (-?\d+|\?)/.exec(line);
    if (!call) continue; // signals, the exit, and a call the exit cut short
    const [, name, args, result] = call as unknown as [string, string, string, string];
    syscalls.add(name);
    if (name === 'socket') socketFamilies.add(args.split(',')[0]!);
    const kind = PATH_WRITES[name];
    if (kind === undefined || result.startsWith('-') || result === '?') continue;
    if (kind === 'flags' && !/O_WRONLY|O_RDWR|O_CREAT|O_TRUNC/.test(args)) continue;
    for (const path of [...args.matchAll(/(?:^|, )"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!)) {
      // A path relative to a directory descriptor other than the working directory's is kept as it
      // is, so that it cannot pass for one inside a folder.
      const relativeToFd = !isAbsolute(path) && /^\d+,/.test(args);
      written.push(relativeToFd ? `(fd ${args.split(',')[0]})/${path}` : resolve(cwd, path));
    }
  }
  return { syscalls, socketFamilies, written };
}
