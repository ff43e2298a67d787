/**
 * A `petstore restore` held at its rename(2), which puts the backup in place: run under strace, which
 * delays each rename 2 s on entry; a test that stops strace (SIGSTOP) then keeps the restore there for
 * as long as it looks at the database (test/processes/backup.test.ts, restore.test.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { CLI, cliEnv, type EnvOverrides } from './processes.ts';
import { killAtExit } from './temp.ts';

export interface HeldRestore {
  /** strace; the restore is its child that runs node. */
  tracer: ChildProcess;
  /** What strace and the restore printed so far. */
  output: () => string;
  /** strace's exit code, once the restore has ended. */
  restored: Promise<number | null>;
}

export function restoreUnderStrace(backup: string, env: EnvOverrides): HeldRestore {
  const args = ['-f', '-qq', '--seccomp-bpf', '-o', '/dev/null', '-e', 'trace=rename', '-e', 'inject=rename:delay_enter=2s'];
  const tracer = spawn('strace', [...args, process.execPath, CLI, 'restore', backup], {
    cwd: tmpdir(),
    env: cliEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killAtExit(tracer);
  let output = '';
  tracer.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  tracer.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  const restored = new Promise<number | null>((resolve) => tracer.on('close', resolve));
  return { tracer, output: () => output, restored };
}
