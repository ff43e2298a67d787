/**
 * Runs the real `petstore` command as a child process, for tests of the process as a whole; in the
 * temporary directory, so that no .env of the checkout changes what a test starts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}

export function cliEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'PETSTORE_ENV', 'PORT', 'HOST', 'LOG_LEVEL', 'TRUST_PROXY']) delete env[name];
  return { ...env, ...extra };
}

export async function runCli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: tmpdir(), env: cliEnv(env) });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? -1)));
  return { code, stdout, stderr };
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** Everything the process wrote to stdout so far (its JSON log). */
  output(): string;
  exited: Promise<number | null>;
}

export interface StartOptions {
  /** The scheme the server speaks (https with TLS_CERT and TLS_KEY). */
  scheme?: 'http' | 'https';
  /** Whether the server answers yet; by default a plain fetch of /healthz. */
  isReady?: (url: string) => Promise<boolean>;
}

export async function startServerProcess(env: Record<string, string>, options: StartOptions = {}): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, 'serve'], {
    cwd: tmpdir(),
    env: cliEnv({ HOST: '127.0.0.1', PORT: String(port), ...env }),
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = `${options.scheme ?? 'http'}://127.0.0.1:${port}`;
  const isReady = options.isReady ?? (async (u: string) => (await fetch(`${u}/healthz`)).ok);
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      if (await isReady(url)) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`server did not start: ${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, child, output: () => out, exited };
}
