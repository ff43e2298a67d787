/**
 * deploy/systemd/petstore.service against the tools and the server: systemd's own checker has nothing
 * to say about it; it starts the built server with exactly the Node.js flags and variables of
 * `npm start` (read from package.json, so the two cannot drift); its settings are the server's, with
 * values it accepts, and its stop timeout outlasts the server's shutdown; and the server, started as
 * the unit starts it and traced by strace through a start, requests and a SIGTERM, makes no system
 * call outside the unit's filter, opens no socket of a family the unit refuses, writes nowhere but
 * the state directory (the rest of the file system is read-only there) and exits 0 within
 * TimeoutStopSec.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { launchOfStart } from '../../scripts/start-command.ts';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.ts';
import { exitWithin, freePort, keysCreate } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';
import { startTracedServer, stracePresent } from '../support/traced-server.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const UNIT_FILE = join(ROOT, 'deploy/systemd/petstore.service');
const UNIT = readFileSync(UNIT_FILE, 'utf8');
const packageJson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  scripts: { start: string };
  bin: { petstore: string };
};
const start = launchOfStart(packageJson.scripts.start);
const SYSTEMD_ANALYZE = '/usr/bin/systemd-analyze';

/** The unit's sections, each a list of its assignments in order (a key may repeat). */
function parseUnit(text: string): Map<string, [string, string][]> {
  const sections = new Map<string, [string, string][]>();
  let current: [string, string][] | undefined;
  for (const line of text.split('\n')) {
    if (/^\s*([#;]|$)/.test(line)) continue;
    assert.doesNotMatch(line, /\\$/, 'no continued lines: each setting is read as one line');
    const section = /^\[(\w+)\]$/.exec(line);
    if (section) {
      sections.set(section[1]!, (current = []));
      continue;
    }
    const setting = /^(\w+)=(.*)$/.exec(line);
    assert.ok(setting && current, `a setting inside a section: ${line}`);
    current.push([setting[1]!, setting[2]!]);
  }
  return sections;
}

const unit = parseUnit(UNIT);
const service = unit.get('Service') ?? [];
const all = (key: string) => service.filter(([k]) => k === key).map(([, v]) => v);
const one = (key: string) => {
  const values = all(key);
  assert.equal(values.length, 1, `[Service] sets ${key} once`);
  return values[0]!;
};

/** Environment= lines, one NAME=value each (no quoting, which the parsing here would not follow). */
const unitEnv: Record<string, string> = Object.fromEntries(
  all('Environment').map((assignment) => {
    const parts = /^([A-Za-z_][A-Za-z0-9_]*)=([^\s"']*)$/.exec(assignment);
    assert.ok(parts, `one unquoted NAME=value per Environment= line: ${assignment}`);
    return [parts[1]!, parts[2]!];
  }),
);
const serviceEnv = Object.fromEntries(Object.entries(unitEnv).filter(([name]) => CONFIG_VARIABLES.includes(name)));
const runtimeEnv = Object.fromEntries(Object.entries(unitEnv).filter(([name]) => !CONFIG_VARIABLES.includes(name)));
const [node, ...execArgs] = one('ExecStart').split(/\s+/);
const stateDirectory = posix.join('/var/lib', one('StateDirectory'));
const workingDirectory = one('WorkingDirectory');

/** A systemd time span in milliseconds: `15`, `15s`, `1min 30s`. */
function timeSpanMs(span: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, '': 1000, min: 60_000 };
  let total = 0;
  for (const part of span.trim().split(/\s+/)) {
    const m = /^(\d+)(ms|s|min|)$/.exec(part);
    assert.ok(m, `a time span systemd and this test read alike: ${span}`);
    total += Number(m[1]) * units[m[2]!]!;
  }
  return total;
}

test('the unit starts the built server with the Node.js flags and variables of npm start', () => {
  assert.ok(posix.isAbsolute(node!), `ExecStart names node by its absolute path: ${node}`);
  assert.equal(posix.basename(node!), 'node');
  const serve = execArgs.slice(-2);
  assert.deepEqual(serve, [posix.join(workingDirectory, packageJson.bin.petstore), 'serve'], "the package's command, serve");
  assert.deepEqual(execArgs.slice(0, -2), start.flags, "npm start's Node.js flags, in its order");
  assert.deepEqual(runtimeEnv, start.env, "npm start's variables, and no other but the service's own");
  assert.ok(start.flags.length > 0 && Object.keys(start.env).length > 0, 'the start script was read');
});

test("the unit's settings are the server's, with values it accepts; its stop timeout outlasts the shutdown", () => {
  const config = loadConfig(serviceEnv);
  assert.equal(config.database.engine, 'sqlite');
  const { path } = config.database as { path: string };
  assert.equal(posix.dirname(path), stateDirectory, 'the database is in the state directory');
  // A bound the server keeps from SIGTERM to exit (src/shutdown.ts): past TimeoutStopSec systemd kills it.
  assert.ok(
    timeSpanMs(one('TimeoutStopSec')) > config.shutdownTimeoutMs,
    `TimeoutStopSec (${one('TimeoutStopSec')}) is longer than SHUTDOWN_TIMEOUT_MS (${config.shutdownTimeoutMs} ms)`,
  );
  assert.equal(one('KillSignal'), 'SIGTERM');
  assert.equal(one('Restart'), 'on-failure');
  assert.ok(one('User') !== 'root' && one('User') !== '', 'a user of its own');
  assert.match(one('EnvironmentFile'), /^-\//, 'the environment file is optional');
  for (const [key, value] of Object.entries({
    NoNewPrivileges: 'yes',
    CapabilityBoundingSet: '',
    ProtectSystem: 'strict',
    ProtectHome: 'yes',
    PrivateTmp: 'yes',
    PrivateDevices: 'yes',
    ProtectKernelTunables: 'yes',
    ProtectKernelModules: 'yes',
    ProtectControlGroups: 'yes',
    SystemCallFilter: '@system-service',
    SystemCallErrorNumber: 'EPERM',
  }))
    assert.equal(one(key), value, `${key}=${value}`);
  // V8 writes machine code and then makes it executable, which MemoryDenyWriteExecute=yes forbids.
  assert.deepEqual(all('MemoryDenyWriteExecute'), []);
});

/** True when systemd-analyze is installed; otherwise the test is skipped loudly (failed under CI=true). */
function systemdAnalyzePresent(t: TestContext): boolean {
  if (existsSync(SYSTEMD_ANALYZE)) return true;
  console.log('#'.repeat(70) + `\n# SKIPPED: the unit check needs ${SYSTEMD_ANALYZE} (apt-get install -y systemd)\n` + '#'.repeat(70));
  if (process.env.CI === 'true') assert.fail(`CI=true needs ${SYSTEMD_ANALYZE}`);
  t.skip('no systemd-analyze');
  return false;
}

/** What `systemd-analyze verify` says about a unit with this text, saved as petstore.service. */
function verify(t: TestContext, text: string): { status: number | null; said: string } {
  const dir = tempDir(t);
  const file = join(dir, 'petstore.service');
  writeFileSync(file, text);
  const run = spawnSync(SYSTEMD_ANALYZE, ['verify', file], { cwd: dir, encoding: 'utf8' });
  return { status: run.status, said: (run.stdout + run.stderr).trim() };
}

test('systemd-analyze verify has nothing to say about the unit', (t) => {
  if (!systemdAnalyzePresent(t)) return;
  // verify refuses an ExecStart whose program does not exist, and a machine running the tests need not
  // have Node.js at the unit's path: the copy checked names the node running this test there, and
  // differs from the shipped unit in nothing else.
  const execStart = `ExecStart=${node} `;
  assert.equal(UNIT.split(execStart).length, 2, 'node is named once, in ExecStart');
  const checked = UNIT.replace(execStart, `ExecStart=${process.execPath} `);
  const { status, said } = verify(t, checked);
  assert.equal(said, '', `systemd-analyze verify said:\n${said}`);
  assert.equal(status, 0);
  // The same check speaks up about a setting systemd does not know (it only warns, and exits 0).
  const misspelt = verify(t, checked.replace('\nProtectHome=', '\nProtectHomes='));
  assert.match(misspelt.said, /Unknown key 'ProtectHomes'/);
});

/** The system calls of systemd's named sets (`@system-service`, ...) and single names, as this systemd expands them. */
function systemCallSet(entries: readonly string[]): Set<string> {
  const calls = new Set<string>();
  const expand = (entry: string) => {
    if (!entry.startsWith('@')) return void calls.add(entry);
    const listed = spawnSync(SYSTEMD_ANALYZE, ['syscall-filter', entry], { encoding: 'utf8' });
    assert.equal(listed.status, 0, `systemd-analyze syscall-filter ${entry}: ${listed.stderr}`);
    for (const line of listed.stdout.split('\n').slice(1)) {
      const member = /^ +(@?[a-z0-9_-]+)$/.exec(line)?.[1];
      if (member) expand(member);
    }
  };
  for (const entry of entries) expand(entry);
  assert.ok(calls.size > 0, entries.join(' '));
  return calls;
}

test('the server started as the unit starts it calls, opens and writes only what the unit allows, and stops within TimeoutStopSec', async (t) => {
  if (!systemdAnalyzePresent(t) || !stracePresent(t)) return;
  // The unit's paths on this machine: this checkout for WorkingDirectory, a folder of the test for the
  // state directory, and the node running this test.
  const state = tempDir(t);
  const here = (value: string) => value.replaceAll(stateDirectory, state);
  const args = execArgs.map((arg) => (arg.startsWith(workingDirectory + '/') ? join(ROOT, arg.slice(workingDirectory.length)) : arg));
  const port = await freePort();
  // What /etc/petstore/env would add: the port and address of this test.
  const env: Record<string, string> = Object.fromEntries(Object.entries(unitEnv).map(([name, value]) => [name, here(value)]));
  Object.assign(env, { PORT: String(port), HOST: '127.0.0.1' });
  const url = `http://127.0.0.1:${port}`;
  const { server, trace } = await startTracedServer(t, process.execPath, args, env, url, { cwd: ROOT, startWithinMs: 30_000 });

  for (const path of ['/healthz', '/readyz', '/docs', '/v1/openapi.json']) assert.equal((await fetch(url + path)).status, 200, path);
  const key = await keysCreate({ DATABASE_URL: env.DATABASE_URL! }, '--plan', 'free');
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const created = await fetch(`${url}/v1/pets`, { method: 'POST', headers, body: JSON.stringify({ name: 'Rex', categoryId: 1 }) });
  assert.equal(created.status, 201);
  const listed = await fetch(`${url}/v1/pets`, { headers: { ...headers, 'accept-encoding': 'br' } });
  assert.equal(listed.status, 200);
  await listed.arrayBuffer();

  server.child.kill(one('KillSignal') as NodeJS.Signals);
  assert.equal(await exitWithin(server, timeSpanMs(one('TimeoutStopSec'))), 0, `exit status 0 within TimeoutStopSec:\n${server.output()}`);
  const { syscalls, socketFamilies, written } = await trace();

  // What the filter allows, less what other settings take away again (as systemd.exec(5) says).
  const allowed = systemCallSet(one('SystemCallFilter').split(/\s+/));
  const removedBy: Record<string, string> = { ProtectClock: '@clock', ProtectKernelModules: '@module', PrivateDevices: '@raw-io' };
  for (const [setting, set] of Object.entries(removedBy))
    if (one(setting) === 'yes') for (const call of systemCallSet([set])) allowed.delete(call);
  assert.ok(syscalls.has('execve') && syscalls.has('accept4'), `the trace holds the start and the requests: ${[...syscalls].join(' ')}`);
  const refused = [...syscalls].filter((call) => !allowed.has(call));
  assert.deepEqual(refused, [], `system calls outside SystemCallFilter=${one('SystemCallFilter')}`);

  const families = one('RestrictAddressFamilies').split(/\s+/);
  assert.ok(socketFamilies.has('AF_INET'), 'the listener was traced');
  assert.deepEqual(
    [...socketFamilies].filter((family) => !families.includes(family)),
    [],
    'socket families outside RestrictAddressFamilies',
  );

  // ProtectSystem=strict: everything is read-only but the state directory (and the private /tmp, unused).
  assert.ok(written.length > 0, 'the database was written');
  assert.deepEqual(
    written.filter((path) => !path.startsWith(state + '/') && path !== state),
    [],
    `files written outside the state directory ${state}`,
  );
});
