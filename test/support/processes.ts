/**
 * Child processes: the real `petstore` command, run from its TypeScript source (node src/cli/main.ts)
 * to completion (runCli, keysCreate) or as a server (startServerProcess), and free ports for what
 * they listen on. Commands run in the temporary directory, so that no .env of the checkout changes
 * what a test starts, and without the settings a host is likely to have exported (DATABASE_URL, PORT
 * and the like), so that what a test sets is what they read. A child still running when the test
 * process ends is killed (temp.ts).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { CONFIG_VARIABLES } from '../../src/config.ts';
import { atEnd, killAtExit, killGroup, killGroupAtExit, type Owner } from './temp.ts';

/** The command's source file, which node runs directly (its types stripped). */
export const CLI = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** A port nothing listens on right now, for a process that must be told its port before it starts. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}

/** What a test sets in a child's environment: a string sets the variable, undefined removes it. */
export type EnvOverrides = Record<string, string | undefined>;

/** This process's environment without the settings a host may have exported, then the overrides. */
export function cliEnv(overrides: EnvOverrides): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Nothing of the host's configuration leaks in; nor the test runner's context, which a child
  // node process would otherwise take as its own.
  for (const name of [...CONFIG_VARIABLES, 'NODE_TEST_CONTEXT']) delete env[name];
  // One server thread unless a test is about workers: the suite's time stays in bounds.
  env.WORKERS = '1';
  for (const [name, value] of Object.entries(overrides)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Where the command runs (and reads a .env from); the temporary directory by default. */
  cwd?: string;
  /** A run still going after this long (say, a server that started when it should have refused) is killed and reported. */
  timeoutMs?: number;
}

/** Runs `petstore ARGS` to completion. */
export async function runCli(args: string[], env: EnvOverrides, options: CliOptions = {}): Promise<CliResult> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd ?? tmpdir(),
    env: cliEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killAtExit(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, timeoutMs);
  try {
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (c, s) => resolve([c, s]));
    });
    if (timedOut) throw new Error(`petstore ${args.join(' ')} still running after ${timeoutMs} ms; stdout: ${stdout} stderr: ${stderr}`);
    return { code, signal, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

/** A run described for an assertion's message: the command, its exit status and all it printed. */
export function explain(args: string[], result: CliResult): string {
  return `petstore ${args.join(' ')} -> ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`;
}

/** The last line a command printed: where `keys create` puts the key, and a --json command its JSON. */
export function lastLine(output: string): string {
  return output.trimEnd().split('\n').at(-1)!;
}

/** What `petstore keys create --json` prints. */
export interface CreatedKey {
  id: string;
  key: string;
  prefix: string;
  plan: string;
  environment: string;
  rpm: number;
  rpd: number;
  label: string | null;
}

/** `petstore keys create ARGS`, which must succeed: the new key, printed alone on the last line. */
export async function keysCreate(env: EnvOverrides, ...args: string[]): Promise<string> {
  const command = ['keys', 'create', ...args];
  const created = await runCli(command, env);
  assert.equal(created.code, 0, explain(command, created));
  return lastLine(created.stdout);
}

/** `petstore keys create ARGS --json`, which must succeed: the new key and its settings. */
export async function keysCreateJson(env: EnvOverrides, ...args: string[]): Promise<CreatedKey> {
  return JSON.parse(await keysCreate(env, ...args, '--json')) as CreatedKey;
}

/** A key whose limits no test reaches (an Enterprise key of a million requests a minute), for tests about load. */
export async function unlimitedKey(env: EnvOverrides): Promise<string> {
  return keysCreate(env, '--plan', 'enterprise', '--rpm', '1000000', '--rpd', '10000000');
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** Everything the process wrote so far, stdout and stderr as they came (its JSON log). */
  output(): string;
  stdout(): string;
  stderr(): string;
  /** Its exit status, once it has exited; null when a signal ended it. */
  exited: Promise<number | null>;
}

export interface StartOptions {
  /** The scheme the server speaks (https with TLS_CERT and TLS_KEY). */
  scheme?: 'http' | 'https';
  /** Whether the server answers yet; by default a plain fetch of /healthz. */
  isReady?: (url: string) => Promise<boolean>;
  /** Where the server runs (and finds a relative DATABASE_URL); the temporary directory by default. */
  cwd?: string;
  /** Stops the server when this test or suite ends, if it still runs (stopServer). */
  owner?: Owner;
  /** How long it may take to answer before the start is given up (15 s by default; longer for a test that starts many at once). */
  startWithinMs?: number;
  /** Handed the process as soon as it is spawned, before it answers: for a test that watches its start. */
  onSpawn?: (server: ServerProcess) => void;
  /**
   * Starts it as the leader of a process group of its own, every member of which is killed when the test
   * process ends: for a command whose processes start others (npm run dev), found with groupMembers.
   */
  group?: boolean;
}

/** `petstore serve` on a free port of 127.0.0.1, once it answers. */
export async function startServerProcess(env: EnvOverrides, options: StartOptions = {}): Promise<ServerProcess> {
  const port = await freePort();
  // The port is the one the returned url names, so the caller's environment cannot move it.
  const url = `${options.scheme ?? 'http'}://127.0.0.1:${port}`;
  return startServerCommand(process.execPath, [CLI, 'serve'], { ...env, HOST: '127.0.0.1', PORT: String(port) }, url, options);
}

/**
 * A server started by any command line (a shell wrapper, `serve` with its own flags), in the
 * temporary directory with cliEnv's environment, once it answers at url.
 */
export async function startServerCommand(
  file: string,
  args: string[],
  env: EnvOverrides,
  url: string,
  options: StartOptions = {},
): Promise<ServerProcess> {
  const child = spawn(file, args, {
    cwd: options.cwd ?? tmpdir(),
    env: cliEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.group ?? false,
  });
  killAtExit(child);
  if (options.group && child.pid !== undefined) killGroupAtExit(child.pid);
  let output = '';
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    output += c;
    stdout += c;
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    output += c;
    stderr += c;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const server: ServerProcess = { url, child, output: () => output, stdout: () => stdout, stderr: () => stderr, exited };
  if (options.owner) atEnd(options.owner, () => stopServer(server));
  options.onSpawn?.(server);
  const isReady = options.isReady ?? (async (u: string) => (await fetch(`${u}/healthz`)).ok);
  const deadline = Date.now() + (options.startWithinMs ?? 15_000);
  for (;;) {
    try {
      if (await isReady(url)) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || child.exitCode !== null || child.signalCode !== null) {
      if (options.group && child.pid !== undefined) killGroup(child.pid);
      else child.kill('SIGKILL');
      throw new Error(`server did not start: ${output}`);
    }
    await sleep(100);
  }
  return server;
}

/** The processes, alive or not yet reaped, of a process group (Linux's /proc). */
export function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // ended meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so count from the last ')'.
    const [, , group] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(group) === pgid) members.push(Number(entry));
  }
  return members;
}

/** SIGKILL to a server still running, and its exit awaited: for a test whose server may be past stopping politely. */
export async function killServer(server: ServerProcess): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGKILL');
  await server.exited;
}

/** SIGTERM to a server still running, and its exit awaited, at most withinMs before SIGKILL. */
export async function stopServer(server: ServerProcess, withinMs = 10_000): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGTERM');
  if ((await exitWithin(server, withinMs)) === 'late') await server.exited;
}

/** Waits at most withinMs for the process to exit: its exit status, or 'late' once it had to be killed. */
export async function exitWithin(server: ServerProcess, withinMs: number): Promise<number | null | 'late'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), withinMs)));
  const code = await Promise.race([server.exited, late]);
  clearTimeout(timer);
  if (code === 'late') server.child.kill('SIGKILL');
  return code;
}
