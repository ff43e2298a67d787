/**
 * Debian's nginx running the shipped deploy/nginx.conf with only its addresses changed: the
 * upstream servers become instances of a test (each keeping the parameters the file gives its
 * servers), it listens on a free port of 127.0.0.1, and its own files live in a folder of the test.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './processes.ts';
import { request } from './raw-http.ts';
import { killAtExit } from './temp.ts';

/** The nginx binary, where it is installed (apt-get install nginx-light). */
export const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((path) => existsSync(path));
/** What a test behind nginx says is missing (tools.ts), or undefined when it is installed. */
export const NGINX_MISSING = NGINX ? undefined : 'nginx is not installed: apt-get install -y nginx-light';

const TEMP_FOLDERS = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'];

/** The shipped configuration, as a test reads it. */
export const SHIPPED_NGINX_CONF = readFileSync(new URL('../../deploy/nginx.conf', import.meta.url), 'utf8');

/** deploy/nginx.conf with these upstream ports and listen port, and nginx's own files in dir. */
export function nginxConfig(dir: string, listenPort: number, upstreamPorts: readonly number[]): string {
  const shipped = SHIPPED_NGINX_CONF;
  const upstream = /upstream petstore \{[^}]*\}/.exec(shipped)?.[0];
  assert.ok(upstream, 'deploy/nginx.conf has the petstore upstream');
  assert.match(shipped, /listen 8080;/);
  const servers = [...upstream.matchAll(/^( *)server \S+?([^\S\n][^;]*)?;\n/gm)];
  assert.ok(servers.length > 0, 'the upstream names its servers');
  const parameters = servers[0]![2] ?? '';
  assert.ok(
    servers.every((s) => (s[2] ?? '') === parameters),
    'every server of the upstream has the same parameters',
  );
  const ours = upstreamPorts.map((port) => `${servers[0]![1]}server 127.0.0.1:${port}${parameters};\n`).join('');
  const first = upstream.indexOf(servers[0]![0]);
  const last = servers.at(-1)!;
  const end = upstream.indexOf(last[0]) + last[0].length;
  const temp = TEMP_FOLDERS.map((name) => `  ${name}_temp_path ${join(dir, name)};`).join('\n');
  return [
    `daemon off;\npid ${join(dir, 'nginx.pid')};\nerror_log ${join(dir, 'error.log')} warn;`,
    shipped
      .replace(upstream, upstream.slice(0, first) + ours + upstream.slice(end))
      .replace('listen 8080;', `listen 127.0.0.1:${listenPort};`)
      .replace(/http \{/, `http {\n  access_log off;\n${temp}`),
  ].join('\n');
}

export interface RunningNginx {
  port: number;
  child: ChildProcess;
  /** What nginx wrote to its error log so far (warnings and errors: each failed upstream attempt). */
  errorLog(): string;
  stop(): Promise<void>;
}

/** nginx with deploy/nginx.conf in front of the given ports, once it answers /healthz. */
export async function startNginx(dir: string, upstreamPorts: readonly number[]): Promise<RunningNginx> {
  for (const name of TEMP_FOLDERS) mkdirSync(join(dir, name), { recursive: true });
  const port = await freePort();
  writeFileSync(join(dir, 'nginx.conf'), nginxConfig(dir, port, upstreamPorts));
  const child = spawn(NGINX!, ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  killAtExit(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let errors = '';
  child.stderr!.on('data', (c) => (errors += c));
  const errorLog = () => (existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : '');
  for (let i = 0; ; i++) {
    try {
      if ((await request(`http://127.0.0.1:${port}/healthz`)).status === 200) break;
    } catch {
      // nginx not listening yet
    }
    if (i > 100 || child.exitCode !== null) {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`nginx did not start: ${errors}${errorLog()}`);
    }
    await sleep(50);
  }
  return {
    port,
    child,
    errorLog,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
