/**
 * deploy/systemd/ against the tools and the server. petstore.service: systemd's own checker has nothing
 * to say about it (nor about the backup units, or the example drop-in installed beside it); it starts
 * the built server with exactly the Node.js flags and variables of `npm start` (read from package.json,
 * so the two cannot drift); its settings are the server's, with values it accepts, and its stop timeout
 * outlasts the server's shutdown; a Node.js older than engines is refused first, in words, with a
 * status systemd does not restart on (run with an old Node.js, as the unit runs it); and the server,
 * started as the unit starts it and traced by strace through a start, requests and a SIGTERM, makes no
 * system call outside the unit's filter, opens no socket of a family the unit refuses, writes nowhere
 * but the state directory (the rest of the file system is read-only there) and exits 0 within
 * TimeoutStopSec; it also serves with /proc cut down as ProcSubset=pid cuts it. petstore-backup.service
 * has the main unit's user, database, environment, release and hardening, and its command, run as the
 * unit runs it under strace, writes a dated backup within the same filter; petstore-backup.timer fires
 * daily, soon enough for the backup alert. install-release.sh, run for real in a fake root, installs
 * two releases side by side, switches between them by renaming a link (strace shows it), rolls back,
 * and never touches the folder of the release in use. The docs' commands name the unit's paths.
 */
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { launchOfStart } from '../../scripts/start-command.ts';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.ts';
import { exitWithin, freePort, keysCreate, runCli, startServerCommand } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';
import { requireTool } from '../support/tools.ts';
import { startTracedServer, stracePresent } from '../support/traced-server.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DIR = join(ROOT, 'deploy/systemd');
const UNIT_FILE = join(DIR, 'petstore.service');
const UNIT = readFileSync(UNIT_FILE, 'utf8');
const BACKUP_UNIT = readFileSync(join(DIR, 'petstore-backup.service'), 'utf8');
const TIMER = readFileSync(join(DIR, 'petstore-backup.timer'), 'utf8');
const DROP_IN = readFileSync(join(DIR, 'petstore.service.d/database.conf.example'), 'utf8');
const SCRIPT = join(DIR, 'install-release.sh');
const OPERATIONS = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
const packageJson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  scripts: { start: string };
  bin: { petstore: string };
  engines: { node: string };
};
const start = launchOfStart(packageJson.scripts.start);
const SYSTEMD_ANALYZE = '/usr/bin/systemd-analyze';
/** The Node.js older than engines that test/processes/node-version.test.ts runs (.ci/run provisions Node.js 20 there). */
const OLD_NODE = join(process.env.PETSTORE_TEST_OLD_NODE_BIN || '/usr/bin', 'node');
/** The status the Node.js check of the units exits with: EX_CONFIG, "78/CONFIG" in systemctl status. */
const NODE_TOO_OLD = 78;

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

/** A unit file's settings: every value of a key in a section, or its one value. */
function unitOf(text: string) {
  const sections = parseUnit(text);
  const all = (key: string, section = 'Service') => (sections.get(section) ?? []).filter(([k]) => k === key).map(([, v]) => v);
  const one = (key: string, section = 'Service') => {
    const values = all(key, section);
    assert.equal(values.length, 1, `[${section}] sets ${key} once`);
    return values[0]!;
  };
  /** Environment= lines, one NAME=value each (no quoting, which the parsing here would not follow). */
  const env = (): Record<string, string> =>
    Object.fromEntries(
      all('Environment').map((assignment) => {
        const parts = /^([A-Za-z_][A-Za-z0-9_]*)=([^\s"']*)$/.exec(assignment);
        assert.ok(parts, `one unquoted NAME=value per Environment= line: ${assignment}`);
        return [parts[1]!, parts[2]!];
      }),
    );
  return { sections, all, one, env };
}

const unit = unitOf(UNIT);
const backup = unitOf(BACKUP_UNIT);
const timer = unitOf(TIMER);
const { all, one } = unit;
const unitEnv = unit.env();
const serviceEnv = Object.fromEntries(Object.entries(unitEnv).filter(([name]) => CONFIG_VARIABLES.includes(name)));
const runtimeEnv = Object.fromEntries(Object.entries(unitEnv).filter(([name]) => !CONFIG_VARIABLES.includes(name)));
const [node, ...execArgs] = one('ExecStart').split(/\s+/);
const stateDirectories = one('StateDirectory').split(/\s+/);
const stateDirectory = posix.join('/var/lib', stateDirectories[0]!);
const workingDirectory = one('WorkingDirectory');

/** The Node.js check of ExecStartPre=: node, `-e`, and code systemd passes on as written. */
function nodeCheck(u: ReturnType<typeof unitOf>): { file: string; code: string } {
  const pre = /^(\S+) -e "(.*)"$/.exec(u.one('ExecStartPre'));
  assert.ok(pre, `ExecStartPre=NODE -e "CODE": ${u.one('ExecStartPre')}`);
  // Inside double quotes systemd reads backslashes as escapes, $ as a variable and % as a specifier
  // (systemd.syntax(7), systemd.service(5)): without any of them (nor a quote), the code is passed as written.
  assert.doesNotMatch(pre[2]!, /["\\$%]/, 'the check holds no character systemd would read');
  return { file: pre[1]!, code: pre[2]! };
}

/** A systemd time span in milliseconds: `15`, `15s`, `1min 30s`, `1h`. */
function timeSpanMs(span: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, '': 1000, min: 60_000, h: 3_600_000 };
  let total = 0;
  for (const part of span.trim().split(/\s+/)) {
    const m = /^(\d+)(ms|s|min|h|)$/.exec(part);
    assert.ok(m, `a time span systemd and this test read alike: ${span}`);
    total += Number(m[1]) * units[m[2]!]!;
  }
  return total;
}

/** The settings of petstore.service that are not its hardening: what it runs, as whom, how it restarts and stops. */
const NOT_HARDENING = new Set([
  'Type',
  'User',
  'Group',
  'StateDirectory',
  'StateDirectoryMode',
  'UMask',
  'WorkingDirectory',
  'Environment',
  'EnvironmentFile',
  'ExecStartPre',
  'ExecStart',
  'ExecReload',
  'SyslogIdentifier',
  'Restart',
  'RestartForceExitStatus',
  'RestartSec',
  'KillSignal',
  'TimeoutStopSec',
]);

test('the unit starts the built server with the Node.js flags and variables of npm start', () => {
  assert.ok(posix.isAbsolute(node!), `ExecStart names node by its absolute path: ${node}`);
  assert.equal(posix.basename(node!), 'node');
  const serve = execArgs.slice(-2);
  assert.deepEqual(serve, [posix.join(workingDirectory, packageJson.bin.petstore), 'serve'], "the package's command, serve");
  assert.deepEqual(execArgs.slice(0, -2), start.flags, "npm start's Node.js flags, in its order");
  assert.deepEqual(runtimeEnv, start.env, "npm start's variables, and no other but the service's own");
  assert.ok(start.flags.length > 0 && Object.keys(start.env).length > 0, 'the start script was read');
  assert.equal(workingDirectory, '/opt/petstore/current', 'the release in use, through its link');
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
  assert.ok(one('User') !== 'root' && one('User') !== '', 'a user of its own');
  assert.match(one('EnvironmentFile'), /^-\//, 'the environment file is optional');
  for (const [key, value] of Object.entries({
    UMask: '0077',
    StateDirectoryMode: '0700',
    NoNewPrivileges: 'yes',
    CapabilityBoundingSet: '',
    ProtectSystem: 'strict',
    ProtectHome: 'yes',
    PrivateTmp: 'yes',
    PrivateDevices: 'yes',
    PrivateMounts: 'yes',
    PrivateUsers: 'yes',
    ProtectKernelTunables: 'yes',
    ProtectKernelModules: 'yes',
    ProtectControlGroups: 'yes',
    ProtectProc: 'invisible',
    ProcSubset: 'pid',
    IPAddressDeny: 'any',
    IPAddressAllow: 'localhost',
    SystemCallErrorNumber: 'EPERM',
  }))
    assert.equal(one(key), value, `${key}=${value}`);
  // An allow list, then what it takes away again (systemd.exec(5): the first line decides the kind).
  assert.deepEqual(all('SystemCallFilter'), ['@system-service', '~@privileged @resources']);
  // IPAddressAllow=localhost: the address the server listens on by default, for a proxy on this machine.
  assert.match(config.host, /^(127\.\d+\.\d+\.\d+|::1|localhost)$/, `HOST ${config.host} is on loopback`);
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

/**
 * A unit's text as this machine can check it: systemd-analyze refuses an Exec line whose program does
 * not exist, and a machine running the tests need not have Node.js at the units' path, so the copy
 * names the node running this test there, and differs from the shipped unit in nothing else.
 */
function checkable(text: string): string {
  const names = [...text.matchAll(/^Exec\w+=(\S+)/gm)].map((m) => m[1]);
  assert.ok(
    names.length > 0 && names.every((name) => name === node || name === '/bin/kill'),
    `every Exec line runs ${node}: ${names.join(' ')}`,
  );
  return text.replaceAll(new RegExp(`^(Exec\\w+=)${node} `, 'gm'), `$1${process.execPath} `);
}

/** What `systemd-analyze ARGS FILES...` says in a folder holding these files (name: text). */
function analyze(t: TestContext, args: string[], files: Record<string, string>): { status: number | null; said: string } {
  const dir = tempDir(t);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const units = Object.keys(files).filter((name) => !name.includes('/'));
  const run = spawnSync(SYSTEMD_ANALYZE, [...args, ...units], { cwd: dir, encoding: 'utf8', env: { ...process.env, TZ: 'UTC' } });
  return { status: run.status, said: (run.stdout + run.stderr).trim() };
}

test('systemd-analyze verify has nothing to say about the units, nor about the example drop-in installed', (t) => {
  if (!systemdAnalyzePresent(t)) return;
  const service = checkable(UNIT);
  const sets: Record<string, string>[] = [
    { 'petstore.service': service },
    { 'petstore-backup.service': checkable(BACKUP_UNIT), 'petstore-backup.timer': TIMER },
    { 'petstore.service': service, 'petstore.service.d/database.conf': DROP_IN },
  ];
  for (const files of sets) {
    const { status, said } = analyze(t, ['verify'], files);
    assert.equal(said, '', `systemd-analyze verify ${Object.keys(files).join(' ')} said:\n${said}`);
    assert.equal(status, 0);
  }
  // The same check speaks up about a setting systemd does not know (it only warns, and exits 0): in
  // the unit, and in the drop-in, which it does read.
  const misspelt = analyze(t, ['verify'], { 'petstore.service': service.replace('\nProtectHome=', '\nProtectHomes=') });
  assert.match(misspelt.said, /Unknown key 'ProtectHomes'/);
  const inDropIn = analyze(t, ['verify'], {
    'petstore.service': service,
    'petstore.service.d/database.conf': DROP_IN.replace('\nIPAddressAllow=', '\nIPAddressAllows='),
  });
  assert.match(inDropIn.said, /database\.conf:\d+: Unknown key 'IPAddressAllows'/);
  // The drop-in only adds addresses: what it sets is IPAddressAllow=, nothing the unit hardens is undone.
  assert.deepEqual(
    [
      ...new Set(
        unitOf(DROP_IN)
          .sections.get('Service')!
          .map(([key]) => key),
      ),
    ],
    ['IPAddressAllow'],
  );
});

test('systemd-analyze security rates the units as their comment and the docs say, or better', (t) => {
  if (!systemdAnalyzePresent(t)) return;
  const stated = /rates it (\d+\.\d)/.exec(UNIT)?.[1];
  assert.ok(stated, "the unit's hardening comment states its exposure level");
  assert.ok(
    OPERATIONS.includes(`\`systemd-analyze security --offline=yes\` rates the unit ${stated}`),
    `docs/operations.md states the same figure, ${stated}`,
  );
  const level = (name: string, text: string) => {
    const { status, said } = analyze(t, ['security', '--offline=yes', '--no-pager'], { [name]: checkable(text) });
    assert.equal(status, 0, said);
    const found = /Overall exposure level for \S+: (\d+\.\d)/.exec(said);
    assert.ok(found, said);
    return Number(found[1]);
  };
  const measured = level('petstore.service', UNIT);
  assert.ok(measured <= Number(stated), `petstore.service rates ${measured}, the docs say ${stated}`);
  assert.ok(level('petstore-backup.service', BACKUP_UNIT) <= measured, 'the backup no more exposed than the service');
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

/**
 * The calls a unit's filter lets through: its first SystemCallFilter= line, an allow list, less each
 * later `~` line, less what other settings take away again (as systemd.exec(5) says).
 */
function allowedCalls(u: ReturnType<typeof unitOf>): Set<string> {
  const [first, ...less] = u.all('SystemCallFilter');
  assert.ok(first && !first.startsWith('~'), 'an allow list first');
  const allowed = systemCallSet(first.split(/\s+/));
  for (const line of less) {
    assert.ok(line.startsWith('~'), `a later line takes calls away: ${line}`);
    for (const call of systemCallSet(line.slice(1).split(/\s+/))) allowed.delete(call);
  }
  const removedBy: Record<string, string> = { ProtectClock: '@clock', ProtectKernelModules: '@module', PrivateDevices: '@raw-io' };
  for (const [setting, set] of Object.entries(removedBy))
    if (u.one(setting) === 'yes') for (const call of systemCallSet([set])) allowed.delete(call);
  return allowed;
}

/**
 * SQLite gives what it makes beside a database (its -wal and -shm, a journal) the database's owner
 * with fchown(2) when, and only when, it runs as root (robust_fchown, in its unix VFS). The units run
 * it as User=, where it never does; this test may run as root, where it does.
 */
const AS_ROOT_ONLY = process.getuid?.() === 0 ? ['fchown'] : [];

/**
 * A command run to its end under strace, one trace file per thread: its result, and every system call
 * it made, but SQLite's fchown as root, held to the files it makes beside a database.
 */
function traced(t: TestContext, file: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
  const prefix = join(tempDir(t), 'trace');
  const run = spawnSync('strace', ['-ff', '-qq', '-y', '-o', prefix, file, ...args], { ...options, encoding: 'utf8', timeout: 60_000 });
  const syscalls = new Set<string>();
  for (const name of readdirSync(dirname(prefix)))
    for (const line of readFileSync(join(dirname(prefix), name), 'utf8').split('\n')) {
      const call = /^([a-z0-9_]+)\(/.exec(line)?.[1];
      if (call === undefined) continue;
      if (AS_ROOT_ONLY.includes(call)) assert.match(line, /^fchown\(\d+<[^>]*-(wal|shm|journal)>, /, "only SQLite's, as root");
      else syscalls.add(call);
    }
  return { run, syscalls };
}

test('an old Node.js is refused in words before its flags are read, with a status systemd does not restart on', (t) => {
  const check = nodeCheck(unit);
  assert.equal(check.file, node, 'the node of ExecStart');
  assert.deepEqual(nodeCheck(backup), check, 'the backup runs the same check');
  // RestartPreventExitStatus= would not stop a failed ExecStartPre= from being started again: it reads
  // the main process's status only. Restart=on-abnormal restarts on no exit status at all, the check's
  // included, and RestartForceExitStatus= (the main process's too) adds the server's own failure, 1.
  assert.equal(one('Restart'), 'on-abnormal');
  assert.deepEqual(all('RestartForceExitStatus'), ['1']);
  assert.deepEqual(all('SuccessExitStatus'), [], `nothing counts ${NODE_TOO_OLD} as success`);
  assert.deepEqual(backup.all('Restart'), [], 'a failed backup waits for the next day');

  // As the unit runs it: in the release's folder (this checkout), with the unit's variables only.
  const env = { ...unitEnv, PATH: '/usr/bin:/bin' };
  const floor = /[0-9.]+/.exec(packageJson.engines.node)![0];
  const fine = spawnSync(process.execPath, ['-e', check.code], { cwd: ROOT, env, encoding: 'utf8' });
  assert.deepEqual([fine.status, fine.stdout, fine.stderr], [0, '', ''], 'silent on this Node.js');

  const oldVersion = existsSync(OLD_NODE) ? spawnSync(OLD_NODE, ['--version'], { encoding: 'utf8' }).stdout.trim() : '';
  const tooOld = /^v(\d+)\.(\d+)/.exec(oldVersion);
  const [a, b] = floor.split('.').map(Number) as [number, number];
  const old = tooOld && (Number(tooOld[1]) < a || (Number(tooOld[1]) === a && Number(tooOld[2]) < b));
  const missing = old
    ? undefined
    : `no Node.js older than ${floor} at ${OLD_NODE}: set PETSTORE_TEST_OLD_NODE_BIN (.ci/run provisions Node.js 20 there)`;
  if (!requireTool(t, 'the old Node.js check of the unit', missing) || !tooOld) return;
  const refused = spawnSync(OLD_NODE, ['-e', check.code], { cwd: ROOT, env, encoding: 'utf8' });
  assert.equal(refused.status, NODE_TOO_OLD, `exit status ${NODE_TOO_OLD}: ${refused.stderr}`);
  assert.equal(refused.stdout, '');
  assert.equal(
    refused.stderr,
    `petstore needs Node.js ${floor} or newer; ${realpathSync(OLD_NODE)} is Node.js ${oldVersion.slice(1)}. ` +
      `Install Node.js ${floor} or newer there, or name another node in ExecStartPre= and ExecStart=, then start the service again.\n`,
  );
  // What ExecStart alone does on a Node.js before 22.5, which has no --experimental-sqlite: node's own
  // refusal of the flag, before any code of the service, exit status 9 (not restarted either).
  if (Number(tooOld[1]) < 22) {
    const flags = spawnSync(OLD_NODE, execArgs, { cwd: ROOT, env, encoding: 'utf8' });
    assert.equal(flags.status, 9, flags.stderr);
    assert.match(flags.stderr, /bad option: --experimental-sqlite/);
  }
});

test('the backup service runs as the service, on its database, with its hardening and none of its network; its command writes a dated backup', async (t) => {
  assert.equal(backup.one('Type'), 'oneshot');
  for (const key of ['User', 'Group', 'WorkingDirectory', 'EnvironmentFile', 'UMask', 'StateDirectoryMode'])
    assert.equal(backup.one(key), one(key), `${key} as in petstore.service`);
  assert.equal(backup.env().DATABASE_URL, unitEnv.DATABASE_URL, 'the same database');
  for (const key of new Set((unit.sections.get('Service') ?? []).map(([k]) => k).filter((k) => !NOT_HARDENING.has(k))))
    assert.deepEqual(backup.all(key), all(key), `${key} as in petstore.service`);
  assert.equal(backup.one('PrivateNetwork'), 'yes');

  const [backupNode, ...backupArgs] = backup.one('ExecStart').split(/\s+/);
  assert.equal(backupNode, node);
  const cli = posix.join(workingDirectory, packageJson.bin.petstore);
  assert.deepEqual(backupArgs.slice(0, 2), ['--experimental-sqlite', cli], 'the release in use, as its commands run (docs/platform.md)');
  const command = backupArgs.slice(2).join(' ');
  const into = /^backup --into (\/\S+) --keep 14$/.exec(command)?.[1];
  assert.ok(into, `backup --into DIR --keep 14: ${command}`);
  assert.equal(unitEnv.BACKUP_DIR, into, "the service's BACKUP_DIR is where the backups go (its /metrics report the newest)");
  for (const u of [unit, backup])
    assert.ok(
      u
        .one('StateDirectory')
        .split(/\s+/)
        .map((d) => posix.join('/var/lib', d))
        .includes(into),
      `${into} is a StateDirectory= of both units: made at start, owned by the user, mode ${one('StateDirectoryMode')}`,
    );

  // The command as the unit runs it, here: the CLI's source (what dist/cli/main.js is built from, so no
  // build is needed), a database in a folder of the test, under strace, against the unit's filter.
  if (!systemdAnalyzePresent(t) || !stracePresent(t)) return;
  const state = tempDir(t);
  const here = (value: string) => value.replaceAll(stateDirectory, state);
  mkdirSync(here(into), { mode: 0o700 });
  const env = { PATH: '/usr/bin:/bin', ...Object.fromEntries(Object.entries(backup.env()).map(([k, v]) => [k, here(v)])) };
  const migrated = await runCli(['migrate'], env);
  assert.equal(migrated.code, 0, migrated.stderr);
  const args = backupArgs.map((arg) => (arg === cli ? join(ROOT, 'src/cli/main.ts') : here(arg)));
  const { run, syscalls } = traced(t, process.execPath, args, { cwd: ROOT, env });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  const written = readdirSync(here(into)).sort();
  assert.equal(written.length, 2, written.join(' '));
  assert.match(written[0]!, /^petstore-\d{8}T\d{6}Z\.db$/);
  assert.equal(written[1], `${written[0]}.sha256`);
  for (const name of written) assert.equal(statSync(join(here(into), name)).mode & 0o777, 0o600, `${name} is the user's only`);
  const allowed = allowedCalls(backup);
  assert.deepEqual(
    [...syscalls].filter((call) => !allowed.has(call)),
    [],
    'system calls of the backup outside its SystemCallFilter=',
  );

  // The check before it, under the same filter.
  const pre = traced(t, process.execPath, ['-e', nodeCheck(backup).code], { cwd: ROOT, env });
  assert.equal(pre.run.status, 0);
  assert.deepEqual(
    [...pre.syscalls].filter((call) => !allowed.has(call)),
    [],
    'system calls of the check',
  );
});

test('the backup timer fires daily, at a randomized moment, and after a missed run, soon enough for the backup alert', (t) => {
  assert.equal(timer.one('Persistent', 'Timer'), 'true', 'a run missed while the machine was off happens at boot');
  const delay = timeSpanMs(timer.one('RandomizedDelaySec', 'Timer'));
  assert.ok(delay > 0 && delay <= 3_600_000, `RandomizedDelaySec=${delay} ms`);
  assert.deepEqual(timer.all('Unit', 'Timer'), [], 'it starts petstore-backup.service, by its name');
  assert.equal(timer.one('WantedBy', 'Install'), 'timers.target');
  // PetstoreBackupStale: the newest backup older than this many hours.
  const alerts = readFileSync(join(ROOT, 'deploy/prometheus/alerts.yml'), 'utf8');
  const stale = /alert: PetstoreBackupStale\s+expr: \|\s+.*petstore_backup_last_success_timestamp_seconds.*> (\d+) \* 3600/.exec(alerts);
  assert.ok(stale, 'the PetstoreBackupStale alert and its hours');
  if (!systemdAnalyzePresent(t)) return;
  const calendar = timer.one('OnCalendar', 'Timer');
  const { status, said } = analyze(t, ['calendar', '--iterations=3', calendar], {});
  assert.equal(status, 0, said);
  assert.match(said, new RegExp(`Normalized form: ${calendar.replaceAll('*', '\\*')}\n`), 'written as systemd writes it');
  const elapses = [...said.matchAll(/(?:Next elapse|Iter\. #\d): \w+ (\S+ \S+) UTC/g)].map((m) => Date.parse(`${m[1]}Z`));
  assert.equal(elapses.length, 3, said);
  const gaps = elapses.slice(1).map((at, i) => at - elapses[i]!);
  assert.deepEqual(gaps, [86_400_000, 86_400_000], 'once a day');
  assert.ok(86_400_000 + delay < Number(stale[1]) * 3_600_000, `a day and the delay are inside the alert's ${stale[1]} hours`);
});

/** Every file and link under dir, with what it holds: a folder's state to compare before and after. */
function snapshot(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (path: string) => {
    const s = lstatSync(path);
    if (s.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
    const content = s.isSymbolicLink()
      ? readlinkSync(path)
      : s.isFile()
        ? createHash('sha256').update(readFileSync(path)).digest('hex')
        : '';
    files.set(path.slice(dir.length), `${s.mode} ${s.mtimeMs} ${s.ino} ${content}`);
  };
  walk(dir);
  return files;
}

test('install-release.sh installs releases side by side, switches the link atomically, rolls back, and never touches the release in use', (t) => {
  if (!stracePresent(t)) return;
  const root = tempDir(t);
  const base = join(root, 'opt/petstore');
  const state = join(root, 'var/lib/petstore');
  mkdirSync(state, { recursive: true, mode: 0o700 });
  // npm takes what it can from its cache; node and npm are this test's.
  const env = {
    PATH: `${dirname(process.execPath)}:/usr/bin:/bin`,
    HOME: process.env.HOME ?? root,
    PETSTORE_BASE: base,
    PETSTORE_NODE: process.execPath,
    PETSTORE_SYSTEMD: 'no',
    DATABASE_URL: `sqlite:${state}/petstore.db`,
    npm_config_prefer_offline: 'true',
    npm_config_update_notifier: 'false',
  };
  const script = (...args: string[]) => spawnSync(SCRIPT, args, { cwd: root, env, encoding: 'utf8', timeout: 300_000 });
  const said = (run: SpawnSyncReturns<string>) => `exit ${run.status}:\n${run.stdout}\n${run.stderr}`;
  const link = (name: string) => (existsSync(join(base, name)) ? readlinkSync(join(base, name)) : undefined);

  const usage = script();
  assert.equal(usage.status, 2, said(usage));
  assert.match(usage.stderr, /^usage: install-release\.sh install SOURCE NAME/);
  assert.equal(script('install', ROOT).status, 2, 'a release needs its name');
  assert.match(script('install', ROOT, '../a').stderr, /not a release name: \.\.\/a/);
  assert.equal(script('rollback').status, 1, 'nothing to go back to');

  const first = script('install', ROOT, '1.0.0-a');
  assert.equal(first.status, 0, said(first));
  assert.match(first.stdout, /Migrated the SQLite file .* to version \d+/, 'petstore migrate of the release, on the database');
  assert.equal(link('current'), 'releases/1.0.0-a');
  assert.equal(link('previous'), undefined);
  const a = join(base, 'releases/1.0.0-a');
  for (const file of [
    'package.json',
    'package-lock.json',
    'openapi.json',
    'dist/cli/main.js',
    'assets',
    'node_modules/fastify/package.json',
  ])
    assert.ok(existsSync(join(a, file)), `the release holds ${file}`);
  assert.ok(!existsSync(join(a, 'node_modules/typescript')), 'production dependencies only');
  assert.ok(!existsSync(join(a, 'src')), 'the built release only');
  const running = snapshot(a);

  // The upgrade, traced: which calls name the link, and how.
  const trace = join(tempDir(t), 'trace');
  const links = 'trace=rename,renameat,renameat2,unlink,unlinkat,rmdir,symlink,symlinkat,link,linkat';
  const second = spawnSync('strace', ['-f', '--seccomp-bpf', '-qq', '-e', links, '-o', trace, SCRIPT, 'install', ROOT, '1.0.0-b'], {
    cwd: root,
    env,
    encoding: 'utf8',
    timeout: 300_000,
  });
  assert.equal(second.status, 0, said(second));
  assert.match(second.stdout, /is already at version \d+: nothing to apply/);
  assert.equal(link('current'), 'releases/1.0.0-b');
  assert.equal(link('previous'), 'releases/1.0.0-a');
  assert.deepEqual(snapshot(a), running, 'the folder of the release in use, untouched by the upgrade');
  // strace pads the pid to a width of its own: one space or more before the call.
  const current = `"${join(base, 'current')}"`;
  const naming = readFileSync(trace, 'utf8')
    .split('\n')
    .filter((line) => line.includes(current));
  assert.ok(naming.length > 0, 'the trace names the link');
  for (const line of naming)
    assert.match(
      line,
      new RegExp(`^\\d+ +rename(at2?)?\\(.*, ${current.replaceAll('.', '\\.')}(, \\w+)?\\) = (0|-1 EEXIST .*)$`),
      `only renamed onto: ${line}`,
    );
  assert.ok(
    naming.some((line) => / = 0$/.test(line)),
    'one rename(2) put the new link in place: the old link named a release until then, the new one from then on',
  );

  // Again: nothing left to do, and nothing changed.
  const installed = snapshot(join(base, 'releases/1.0.0-b'));
  const again = script('install', ROOT, '1.0.0-b');
  assert.equal(again.status, 0, said(again));
  assert.match(again.stdout, /1\.0\.0-b is installed already/);
  assert.deepEqual([link('current'), link('previous')], ['releases/1.0.0-b', 'releases/1.0.0-a']);
  assert.deepEqual(snapshot(join(base, 'releases/1.0.0-b')), installed);

  const back = script('rollback');
  assert.equal(back.status, 0, said(back));
  assert.equal(link('current'), 'releases/1.0.0-a', 'back to the previous release');
  assert.equal(script('rollback').status, 0);
  assert.equal(link('current'), 'releases/1.0.0-a', 'run again, it stays there');
  assert.equal(script('rollback', '1.0.0-b').status, 0);
  assert.equal(link('current'), 'releases/1.0.0-b', 'or to a release named');
  assert.deepEqual(snapshot(a), running, 'releases are never changed');
  assert.deepEqual(readdirSync(base).sort(), ['current', 'previous', 'releases'], 'no temporary link left');
  assert.deepEqual(readdirSync(join(base, 'releases')).sort(), ['1.0.0-a', '1.0.0-b'], 'no partial release left');
});

test('the server started as the unit starts it calls, opens and writes only what the unit allows, and stops within TimeoutStopSec', async (t) => {
  if (!systemdAnalyzePresent(t) || !stracePresent(t)) return;
  // The unit's paths on this machine: this checkout for WorkingDirectory, a folder of the test for the
  // state directory, and the node running this test.
  const state = tempDir(t);
  const here = (value: string) => value.replaceAll(stateDirectory, state);
  for (const folder of stateDirectories.slice(1)) mkdirSync(here(posix.join('/var/lib', folder)), { mode: 0o700 });
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

  const allowed = allowedCalls(unit);
  assert.ok(syscalls.has('execve') && syscalls.has('accept4'), `the trace holds the start and the requests: ${[...syscalls].join(' ')}`);
  const refused = [...syscalls].filter((call) => !allowed.has(call) && !AS_ROOT_ONLY.includes(call));
  assert.deepEqual(refused, [], `system calls outside SystemCallFilter=${all('SystemCallFilter').join(' ')}`);

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

test('the server started as the unit starts it serves, metrics included, with /proc as ProcSubset=pid and ProtectProc=invisible leave it', async (t) => {
  // systemd mounts the unit's /proc with these options: here a mount and PID namespace of unshare(1) does.
  const mount = 'mount -t proc -o subset=pid,hidepid=invisible proc /proc';
  const probe = spawnSync(
    'unshare',
    ['--mount', '--pid', '--fork', 'sh', '-c', `${mount} && test -e /proc/self/status && ! test -e /proc/meminfo`],
    {
      encoding: 'utf8',
    },
  );
  const missing =
    probe.status === 0 ? undefined : `unshare and ${mount} (root, Linux 5.8) failed here: ${probe.error?.message ?? probe.stderr}`;
  if (!requireTool(t, 'the /proc subset test', missing)) return;
  const state = tempDir(t);
  const here = (value: string) => value.replaceAll(stateDirectory, state);
  for (const folder of stateDirectories.slice(1)) mkdirSync(here(posix.join('/var/lib', folder)), { mode: 0o700 });
  const args = execArgs.map((arg) => (arg.startsWith(workingDirectory + '/') ? join(ROOT, arg.slice(workingDirectory.length)) : arg));
  const port = await freePort();
  const token = 'metrics-token-of-this-test';
  const env: Record<string, string> = Object.fromEntries(Object.entries(unitEnv).map(([name, value]) => [name, here(value)]));
  Object.assign(env, { PORT: String(port), HOST: '127.0.0.1', METRICS_TOKEN: token });
  const url = `http://127.0.0.1:${port}`;
  const namespaced = ['--mount', '--pid', '--fork', '--kill-child', 'sh', '-c', `${mount} && exec "$@"`, 'sh', process.execPath, ...args];
  const server = await startServerCommand('unshare', namespaced, env, url, { owner: t, cwd: ROOT, startWithinMs: 30_000 });

  assert.equal((await fetch(`${url}/readyz`)).status, 200);
  const key = await keysCreate({ DATABASE_URL: env.DATABASE_URL! }, '--plan', 'free');
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const created = await fetch(`${url}/v1/pets`, { method: 'POST', headers, body: JSON.stringify({ name: 'Rex', categoryId: 1 }) });
  assert.equal(created.status, 201);
  const metrics = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(metrics.status, 200);
  const text = await metrics.text();
  // Read from the process's own /proc/self, which the subset keeps.
  for (const name of ['process_resident_memory_bytes', 'process_open_fds', 'process_max_fds', 'process_cpu_seconds_total']) {
    const value = Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    assert.ok(value > 0, `${name} ${value}`);
  }
  assert.doesNotMatch(server.output(), /"level":[56]0/, `nothing logged as an error:\n${server.output()}`);
  // unshare(1) leaves SIGTERM to its child: the server, which drains and exits 0, and unshare with it.
  const pid = Number(readFileSync(`/proc/${server.child.pid}/task/${server.child.pid}/children`, 'utf8').trim());
  process.kill(pid, one('KillSignal') as NodeJS.Signals);
  assert.equal(await exitWithin(server, timeSpanMs(one('TimeoutStopSec'))), 0, `exit status 0 within TimeoutStopSec:\n${server.output()}`);
});

test("the docs' commands for the systemd layout name the units' paths, database and environment file", () => {
  const section = (title: string) => {
    const from = OPERATIONS.indexOf(`\n## ${title}\n`);
    assert.ok(from >= 0, `docs/operations.md has "## ${title}"`);
    const to = OPERATIONS.indexOf('\n## ', from + 1);
    return OPERATIONS.slice(from, to < 0 ? undefined : to);
  };
  const underSystemd = section('Under systemd');
  const backups = section('Backups');
  const script = readFileSync(SCRIPT, 'utf8');
  for (const [where, text] of Object.entries({ 'Under systemd': underSystemd, 'install-release.sh': script })) {
    for (const m of text.matchAll(/DATABASE_URL=(sqlite:\S+)/g)) assert.equal(m[1], unitEnv.DATABASE_URL, `${where}: ${m[0]}`);
    for (const m of text.matchAll(/EnvironmentFile=(\S+)/g)) assert.equal(m[1], one('EnvironmentFile'), `${where}: ${m[0]}`);
  }
  for (const [where, text] of Object.entries({ 'Under systemd': underSystemd, Backups: backups }))
    assert.doesNotMatch(text, /npx petstore|cd \/srv\/petstore|\/etc\/cron/, `${where}: no command of another layout`);
  assert.ok(underSystemd.includes(`${node} --experimental-sqlite`), "the units' node, with the flag commands need on 22.12");
  assert.ok(
    script.includes(`node=\${PETSTORE_NODE:-${node}}`) && script.includes('"$node" --experimental-sqlite'),
    "the script's node too",
  );
  assert.ok(underSystemd.includes('dist/cli/main.js') && underSystemd.includes(workingDirectory), 'the CLI of the release in use');
  assert.ok(backups.includes('systemctl start petstore-backup'), 'an on-demand backup, through the unit');
  assert.ok(
    backups.replace(/\s+/g, ' ').includes(backup.one('ExecStart').split(' ').slice(-5).join(' ')),
    'the backup command of the unit',
  );
  // install-release.sh runs migrate in the unit's working directory layout, as its user.
  assert.match(script, new RegExp(`--uid=${one('User')} --gid=${one('Group')}`));
});
