/**
 * On a Node.js older than package.json's engines, `npm install`, `npm ci` and `npm start` refuse at
 * once: npm 10.9 and later read package.json's `devEngines` before resolving or fetching anything,
 * and stop with npm's own EBADDEVENGINES error naming the version needed and the version found. The
 * project's preinstall and prestart scripts are the second line, for an npm that ignores devEngines
 * (npm 10.8, as Node.js 20 ships it) or is told to (--force): one line naming the version needed,
 * rather than `node: bad option` or a syntax error. Run with the `node` and `npm` in
 * PETSTORE_TEST_OLD_NODE_BIN (the machine's own in /usr/bin by default; .ci/run provisions Node.js 20
 * with npm 10.9), in a scratch copy of package.json and package-lock.json, with an empty npm cache
 * and a registry nobody listens on, so that any download would show as a network error; skipped
 * loudly where that Node.js is missing or new enough, or that npm too old to read devEngines, and
 * failed then under CI=true.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { freePort } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';
import { requireTool } from '../support/tools.ts';

const run = promisify(execFile);
const OLD_BIN = process.env.PETSTORE_TEST_OLD_NODE_BIN || '/usr/bin';
const OLD_NODE = join(OLD_BIN, 'node');
const OLD_NPM = join(OLD_BIN, 'npm');
/** The old Node.js first, so that npm and the scripts it runs find it as `node`. */
const OLD_PATH = `${OLD_BIN}:/usr/bin:/bin`;
const INSTALL_HINT = 'set PETSTORE_TEST_OLD_NODE_BIN to a folder holding both; .ci/run provisions Node.js 20 and npm 10.9 there';
const PACKAGE = new URL('../../package.json', import.meta.url);
const LOCK = new URL('../../package-lock.json', import.meta.url);
const manifest = JSON.parse(readFileSync(PACKAGE, 'utf8')) as {
  engines: { node: string };
  devEngines: { runtime: { name: string; version: string; onFail: string } };
  scripts: Record<string, string>;
};
const needed = /^>=(\d+)\.(\d+)$/.exec(manifest.engines.node)!;
const older = (version: string, major: number, minor: number) => {
  const [a, b] = version.replace(/^v/, '').split('.').map(Number) as [number, number];
  return a < major || (a === major && b < minor);
};

const noOldNode = `no Node.js older than ${needed[1]}.${needed[2]} at ${OLD_NODE} with an npm at ${OLD_NPM}: ${INSTALL_HINT}`;

async function oldNodeVersion(): Promise<string | undefined> {
  if (!existsSync(OLD_NODE) || !existsSync(OLD_NPM)) return undefined;
  const { stdout } = await run(OLD_NODE, ['--version']);
  return older(stdout.trim(), Number(needed[1]), Number(needed[2])) ? stdout.trim() : undefined;
}

/** The old Node.js's npm with ARGS in dir: its exit status and all it printed. */
async function oldNpm(dir: string, args: string[]): Promise<{ code: number | string; output: string }> {
  // The machine's own Node.js and npm alone; none of an npm test run's own settings (npm_config_*).
  const env: NodeJS.ProcessEnv = { HOME: process.env.HOME, PATH: OLD_PATH, npm_config_update_notifier: 'false' };
  try {
    // Past a minute, npm is retrying a download: the refusal came too late.
    const { stdout, stderr } = await run(OLD_NPM, args, { cwd: dir, env, timeout: 60_000 });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code: number | string; signal?: string; stdout: string; stderr: string };
    return { code: e.signal ?? e.code, output: e.stdout + e.stderr };
  }
}

/** A scratch project: package.json and package-lock.json, an empty cache beside, a registry that refuses connections. */
async function scratch(t: Parameters<typeof tempDir>[0]): Promise<{ dir: string; offline: string[] }> {
  const dir = tempDir(t);
  copyFileSync(PACKAGE, join(dir, 'package.json'));
  copyFileSync(LOCK, join(dir, 'package-lock.json'));
  // A port that was free a moment ago: nothing listens there, so a connection is refused at once.
  const offline = ['--cache', tempDir(t), '--registry', `http://127.0.0.1:${await freePort()}/`, '--fetch-retries=0'];
  return { dir, offline };
}

test('npm install, npm ci and npm start refuse an old Node.js before anything is fetched, naming the version needed', async (t) => {
  const version = await oldNodeVersion();
  if (!requireTool(t, 'the old Node.js test', version === undefined ? noOldNode : undefined) || version === undefined) return;
  const npmVersion = (await run(OLD_NPM, ['--version'], { env: { PATH: OLD_PATH } })).stdout.trim();
  const tooOld = `npm ${npmVersion} at ${OLD_NPM} predates devEngines (10.9): there the preinstall refuses, after the download; ${INSTALL_HINT}`;
  if (!requireTool(t, 'the old Node.js test', older(npmVersion, 10, 9) ? tooOld : undefined)) return;
  const { dir, offline } = await scratch(t);
  const { runtime } = manifest.devEngines;
  assert.deepEqual(runtime, { name: 'node', version: manifest.engines.node, onFail: 'error' }, 'the floor engines names, refused');
  for (const args of [
    ['install', ...offline],
    ['ci', ...offline],
    ['start', ...offline],
  ]) {
    const { code, output } = await oldNpm(dir, args);
    const command = `npm ${args[0]}`;
    assert.notEqual(code, 0, `${command}: ${output}`);
    assert.ok(
      output.includes(`npm error EBADDEVENGINES Invalid semver version "${runtime.version}" does not match "${version}" for "runtime"`),
      `${command} names the version needed and the one found: ${output}`,
    );
    assert.doesNotMatch(output, /ECONNREFUSED|FetchError|ENOTFOUND|ETIMEDOUT|network|request to http/i, `${command} fetched nothing`);
    assert.doesNotMatch(output, /EBADENGINE /, `${command} looked at no dependency`);
    assert.deepEqual(readdirSync(dir).sort(), ['package-lock.json', 'package.json'], `${command} left nothing behind`);
  }
});

test('forced past devEngines, npm start and npm install still refuse an old Node.js in one line that names the version needed', async (t) => {
  const version = await oldNodeVersion();
  if (!requireTool(t, 'the old Node.js test', version === undefined ? noOldNode : undefined) || version === undefined) return;
  const { dir, offline } = await scratch(t);
  // The scripts alone (npm install --force would fetch everything first, then run the preinstall).
  for (const script of ['prestart', 'preinstall']) {
    const { code, output } = await oldNpm(dir, ['run', script, '--force', ...offline]);
    assert.equal(code, 1, `${script}: ${output}`);
    const ours = output.split('\n').filter((line) => line.startsWith('petstore'));
    assert.deepEqual(
      ours,
      [
        `petstore needs Node.js ${needed[1]}.${needed[2]} or newer; this is Node.js ${version.slice(1)} (node --version). Install Node.js ${needed[1]}.${needed[2]}+, then run this again.`,
      ],
      script,
    );
  }
});

test('the same checks pass silently on this Node.js', async () => {
  const { scripts } = manifest;
  assert.equal(scripts.prestart, scripts.preinstall, 'one check');
  const [, code] = /^node -e "(.*)"$/.exec(scripts.prestart!)!;
  const { stdout, stderr } = await run(process.execPath, ['-e', code!]);
  assert.equal(stdout + stderr, '');
});
