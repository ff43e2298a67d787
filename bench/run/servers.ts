/** The server processes: the service as `npm start` runs it, and the references, pinned to their cores. */

import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { assertNodeProcess, rssMiB } from '../cpu.ts';
import type { Dataset } from './datasets.ts';
import { made, takePort } from './session.ts';
import { REDIS_PREFIX, REDIS_URL, type Variant } from './settings.ts';

// Servers

export interface Server {
  name: string;
  url: string;
  pid: number;
  child: ChildProcess;
  /** The service (not the ceiling, the floor or json-server): its memory is in the budget. */
  service: boolean;
  dataset?: Dataset;
  /** Server threads (WORKERS): the memory lines of the budget are one worker's. */
  workers: number;
  /** Resident memory as soon as it answered, before any load. */
  idleRssMiB?: number;
}

async function startPinned(
  name: string,
  command: string,
  args: string[],
  env: Record<string, string>,
  readyUrl: string,
  extra: Pick<Server, 'service' | 'dataset' | 'workers'>,
  cores = '0',
): Promise<Server> {
  const child = spawn('taskset', ['-c', cores, command, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const server: Server = { name, url: new URL(readyUrl).origin, pid: child.pid!, child, ...extra };
  made.servers.push(server);
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await fetch(readyUrl);
      break;
    } catch {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${name} did not start`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  assertNodeProcess(server.pid, name);
  server.idleRssMiB = rssMiB(server.pid);
  return server;
}

export async function stopServer(s: Server): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return;
  const exited = new Promise((r) => s.child.once('exit', r));
  s.child.kill('SIGTERM');
  const timer = setTimeout(() => s.child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

export function startReference(name: string, args: (port: number) => string[], path: string): Promise<Server> {
  const port = takePort();
  return startPinned(name, process.execPath, args(port), {}, `http://127.0.0.1:${port}${path}`, { service: false, workers: 1 });
}

export async function startService(
  name: string,
  variant: Variant,
  dataset: Dataset,
  redis: boolean,
  extra: Record<string, string> = {},
  workers = 1,
): Promise<Server> {
  const port = takePort();
  // wrk's connections all come from 127.0.0.1: no per-address connection cap, whatever BENCH_CONNECTIONS says.
  const env: Record<string, string> = {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: dataset.databaseUrl,
    LOG_LEVEL: 'warn',
    MAX_CONNECTIONS_PER_ADDRESS: '0',
    // One server thread on core 0 unless the scenario is about workers: those run on cores 0 to WORKERS - 1,
    // and with two on a two-core machine the second shares wrk's core.
    WORKERS: String(workers),
    ...extra,
  };
  if (redis) {
    made.redis = true;
    Object.assign(env, { REDIS_URL, REDIS_KEY_PREFIX: `${REDIS_PREFIX}${port}` });
  }
  // Run as `npm start` runs it: node with the start script's flags (if any), on this Node.js; the
  // variant's allocator variables and flags, in a BENCH_AB run, instead.
  const { env: variantEnv, flags } = variant.launch;
  const command = join(variant.checkout ?? '.', 'dist/cli/main.js');
  const ready = `http://127.0.0.1:${port}/healthz`;
  const cores = workers === 1 ? '0' : `0-${workers - 1}`;
  return startPinned(
    name,
    process.execPath,
    [...flags, command, 'serve'],
    { ...env, ...variantEnv },
    ready,
    { service: true, dataset, workers },
    cores,
  );
}
