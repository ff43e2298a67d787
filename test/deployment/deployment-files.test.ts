/**
 * The container files cannot be run here, so they are checked against the code instead: every
 * variable the Dockerfile and compose.yaml set is one the configuration reads, with a value it
 * accepts; ports agree across the Dockerfile, compose, nginx and the health check; the command is
 * the package's serve command with the same variables and node flags as `npm start`; and docs/scale-out.md's plain-process
 * scale-out section names the same variables as the compose file. compose's Redis is run here with its own
 * arguments, to show that its counters outlive a restart.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { Redis } from 'ioredis';
import { buildInputs as listedInputs } from '../../scripts/build-record.mjs';
import { launchOfStart } from '../../scripts/start-command.ts';
import { CONFIG_VARIABLES as VARIABLE_NAMES, loadConfig } from '../../src/config.ts';
import { freePort } from '../support/processes.ts';
import { killAtExit, tempDir } from '../support/temp.ts';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const dockerfile = read('Dockerfile');
const compose = parse(read('compose.yaml')) as {
  services: Record<
    string,
    { environment?: Record<string, string>; ports?: string[]; command?: string[]; build?: string; volumes?: string[] }
  >;
};
const nginx = read('deploy/nginx.conf');
const packageJson = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
/** The variables (the C allocator's) and Node.js flags `npm start` gives the server (docs/platform.md). */
const start = launchOfStart(packageJson.scripts.start!);

/** Variables the configuration module reads. */
const CONFIG_VARIABLES = new Set(VARIABLE_NAMES);

const dockerEnv: Record<string, string> = Object.fromEntries(
  [...dockerfile.matchAll(/^\s*(?:ENV\s+)?([A-Z_]+)=(\S+?)\s*\\?$/gm)].map((m) => [m[1]!, m[2]!]),
);
const apiServices = Object.entries(compose.services).filter(([, s]) => s.build !== undefined);

test('the configuration module is read for its variable names', () => {
  for (const name of ['PORT', 'HOST', 'DATABASE_URL', 'REDIS_URL', 'TRUST_PROXY', 'SHUTDOWN_DRAIN_MS'])
    assert.ok(CONFIG_VARIABLES.has(name), name);
});

test('every variable the Dockerfile sets is read by the configuration and accepted', () => {
  assert.ok(Object.keys(dockerEnv).length >= 4, JSON.stringify(dockerEnv));
  for (const name of Object.keys(dockerEnv)) {
    if (name === 'NODE_ENV') continue; // read by libraries, not by the service's configuration
    if (name in start.env) continue; // the runtime's, as npm start sets them (checked below)
    assert.ok(CONFIG_VARIABLES.has(name), `Dockerfile sets ${name}, which the service does not read`);
  }
  const env = Object.fromEntries(Object.entries(dockerEnv).filter(([name]) => name !== 'NODE_ENV' && !(name in start.env)));
  const config = loadConfig(env);
  assert.equal(config.host, '0.0.0.0');
  assert.deepEqual(config.database, { engine: 'sqlite', path: '/data/petstore.db', createFolder: false });
  assert.match(dockerfile, /VOLUME \["\/data"\]/);
});

test('every variable of each compose instance is read by the configuration and accepted', () => {
  assert.equal(apiServices.length, 2, 'two service instances');
  for (const [name, service] of apiServices) {
    const env = service.environment!;
    for (const variable of Object.keys(env))
      assert.ok(CONFIG_VARIABLES.has(variable), `${name} sets ${variable}, which the service does not read`);
    const config = loadConfig(env);
    assert.equal(config.database.engine, 'postgres', name);
    assert.ok(config.redisUrl, `${name} uses Redis`);
    assert.deepEqual(config.trustProxy, { kind: 'hops', hops: 1 }, `${name} believes one proxy hop`);
  }
});

test('ports agree: EXPOSE, PORT, the health check, compose and the nginx upstreams', () => {
  const exposed = /^EXPOSE (\d+)$/m.exec(dockerfile)![1]!;
  assert.equal(dockerEnv.PORT, exposed);
  // The health check follows PORT, whose value in the image is the exposed port.
  assert.match(dockerfile, new RegExp(`HEALTHCHECK[\\s\\S]*127\\.0\\.0\\.1:\\$\\{process\\.env\\.PORT \\|\\| ${exposed}\\}/healthz`));
  for (const [name, service] of apiServices) {
    assert.equal(service.environment!.PORT, exposed, name);
    assert.match(nginx, new RegExp(`server ${name}:${exposed}[ ;]`), `nginx upstream for ${name}`);
  }
  const published = compose.services.proxy!.ports![0]!;
  const listen = /listen (\d+);/.exec(nginx)![1]!;
  assert.equal(published.split(':')[1], listen);
  assert.match(nginx, /X-Forwarded-For \$proxy_add_x_forwarded_for/);
});

test('the container runs the serve command as npm start does, with the same variables and Node.js flags', () => {
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(dockerfile)![1]!) as string[];
  // npm passes a SIGTERM on to the shell that runs the script; `exec` makes that shell the server.
  assert.match(
    packageJson.scripts.start!,
    /&& exec (env \S+=\S* .*)?node .*dist\/cli\/main\.js serve$/,
    'npm start execs the server (docs/cli.md)',
  );
  assert.deepEqual(cmd, ['node', ...start.flags, 'dist/cli/main.js', 'serve'], 'node, as npm start runs it');
  for (const [name, value] of Object.entries(start.env)) assert.equal(dockerEnv[name], value, `Dockerfile's ${name}, as npm start sets it`);
  assert.equal(read('src/cli/main.ts').split('\n')[0], '#!/usr/bin/env node', 'no runtime setting in the command itself');
  assert.match(dockerfile, /^USER node$/m, 'runs as a non-root user');
  assert.match(dockerfile, /^FROM .* AS build$/m, 'multi-stage');
});

test('every runtime setting of the start script is accounted for in docs/platform.md and BENCHMARKS.md', () => {
  // A setting stays only with its A/B of CPU and memory (docs/platform.md, "Runtime settings"): one added
  // to the script without a line of its own in both documents fails here.
  const section = (text: string, heading: string) => {
    const from = text.indexOf(`## ${heading}\n`);
    assert.ok(from >= 0, `a "${heading}" section`);
    const to = text.indexOf('\n## ', from + 1);
    return text.slice(from, to < 0 ? undefined : to);
  };
  const platform = section(read('docs/platform.md'), 'Runtime settings');
  const benchmarks = section(read('BENCHMARKS.md'), 'Runtime settings');
  const settings = [...Object.entries(start.env).map(([name, value]) => `${name}=${value}`), ...start.flags];
  assert.ok(settings.length > 0);
  for (const setting of settings) {
    assert.ok(platform.includes(`\n- \`${setting}\`: `), `docs/platform.md says why ${setting} stays`);
    if (setting !== '--experimental-sqlite') assert.ok(benchmarks.includes(`\`${setting}\``), `BENCHMARKS.md has the A/B of ${setting}`);
  }
});

test('the runtime stage installs production dependencies without scripts and copies what the build made', () => {
  const runtimeStage = dockerfile.slice(dockerfile.indexOf('\nFROM ', dockerfile.indexOf('AS build')));
  assert.match(runtimeStage, /npm ci --omit=dev --ignore-scripts/);
  for (const built of ['dist', 'assets']) assert.match(runtimeStage, new RegExp(`^COPY --from=build /app/${built} \\./${built}$`, 'm'));
  // The server reads the committed OpenAPI document at start to serve it (src/http/site/openapi-document.ts).
  assert.match(runtimeStage, /^COPY openapi\.json \.\/$/m, 'the runtime stage has the OpenAPI document the server serves');
  assert.doesNotMatch(read('.dockerignore'), /^openapi\.json$/m);
  assert.doesNotMatch(dockerfile, /g\+\+|python3|build-essential/, 'nothing is compiled');
  const image = (/^FROM node:(\d+)/m.exec(dockerfile) ?? [])[1];
  assert.equal(image, read('.nvmrc').trim(), 'the image runs the Node.js line the project is developed on');
});

test('docs/scale-out.md shows the same deployment with plain processes, with the same variables', () => {
  const section = read('docs/scale-out.md');
  for (const variable of Object.keys(apiServices[0]![1].environment!)) {
    if (['HOST', 'PORT', 'PETSTORE_ENV', 'LOG_LEVEL', 'SHUTDOWN_DRAIN_MS'].includes(variable)) continue; // defaults or per instance
    assert.ok(section.includes(variable), `docs/scale-out.md does not mention ${variable}`);
  }
  assert.match(section, /compose\.yaml/);
});

test('the build stage copies every project file that npm ci and its prepare script read', () => {
  const buildStage = dockerfile.slice(0, dockerfile.indexOf('\nFROM ', dockerfile.indexOf('AS build')));
  const copied = [...buildStage.matchAll(/^COPY (.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/));
  // The prepare script and the scripts it calls, followed to the TypeScript projects they build.
  const scripts = packageJson.scripts;
  const expand = (command: string): string =>
    command.replace(/npm run ([\w:-]+)(?: --silent)?/g, (_all, name: string) => expand(scripts[name] ?? ''));
  const prepare = expand(scripts.prepare!);
  const projects = [...prepare.matchAll(/tsc -p (\S+)/g)].map((m) => m[1]!);
  assert.ok(projects.length >= 1, prepare);
  const buildScripts = [...prepare.matchAll(/\bnode (\S+\.m?[jt]s)\b/g)].map((m) => m[1]!);
  assert.ok(buildScripts.includes('scripts/build.mjs'), prepare);
  // What scripts/build.mjs reads, as the record npm start decides by lists it; node_modules is installed.
  const buildInputs = listedInputs().filter((path) => !path.split('/').includes('node_modules'));
  assert.ok(buildInputs.includes('tsconfig.build.json'), buildInputs.join(' '));
  const needed = ['package.json', 'package-lock.json', ...projects, ...buildScripts, ...buildInputs];
  for (const project of projects) {
    const tsconfig = JSON.parse(read(project)) as { extends?: string; include?: string[] };
    const base = project.includes('/') ? project.slice(0, project.lastIndexOf('/') + 1) : '';
    if (tsconfig.extends) needed.push(base + tsconfig.extends.replace(/^\.\//, ''));
    for (const pattern of tsconfig.include ?? []) needed.push(base + pattern.replace(/^\.\//, ''));
  }
  for (const path of needed.map((p) => posix.normalize(p))) {
    const top = path.split('/')[0]!;
    assert.ok(
      copied.some((c) => c.replace(/\/$/, '').replace(/^\.\//, '') === top || c === path),
      `the build stage does not copy ${path}`,
    );
  }
});

test("compose's Redis keeps its counters across a restart: its own arguments, run here with Debian's redis-server", async (t) => {
  const redis = compose.services.redis!;
  assert.ok(
    redis.volumes?.some((v) => v.endsWith(':/data')),
    'its files are in a volume',
  );
  const [binary, ...args] = redis.command!;
  assert.equal(binary, 'redis-server');
  const dir = tempDir(t);
  const port = await freePort();
  /** Runs the server until `work` is done, then stops it as a container stop does (SIGTERM). */
  const runWith = async (work: (client: Redis) => Promise<void>) => {
    const server = spawn('redis-server', [...args, '--port', String(port), '--bind', '127.0.0.1', '--dir', dir], { stdio: 'ignore' });
    killAtExit(server);
    const exited = new Promise((resolve) => server.once('exit', resolve));
    const client = new Redis(port, '127.0.0.1', { retryStrategy: () => 50 });
    client.on('error', () => undefined); // refused until the server listens: it retries
    try {
      await work(client);
    } finally {
      client.disconnect();
      server.kill('SIGTERM');
      await exited;
    }
  };
  await runWith(async (c) => void (await c.hset('petstore:{key:k}:day', 's', '1795305600000', 'c', '999')));
  await runWith(async (c) => assert.equal(await c.hget('petstore:{key:k}:day', 'c'), '999'));
});
