/**
 * On a Node.js older than package.json's engines, `npm start` refuses at once and `npm install` at its
 * end (npm runs the project's own preinstall after installing the dependencies), each with one line
 * naming the version needed, rather than `node: bad option` or a syntax error. Run with the machine's
 * own Node.js (/usr/bin/node, 20 on this image) and npm in a scratch copy of package.json; skipped
 * where that Node.js is missing or new enough.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { tempDir } from '../support/temp.ts';

const run = promisify(execFile);
const OLD_NODE = '/usr/bin/node';
const PACKAGE = new URL('../../package.json', import.meta.url);
const manifest = JSON.parse(readFileSync(PACKAGE, 'utf8')) as { engines: { node: string }; scripts: Record<string, string> };
const needed = /^>=(\d+)\.(\d+)$/.exec(manifest.engines.node)!;

async function oldNodeVersion(): Promise<string | undefined> {
  if (!existsSync(OLD_NODE)) return undefined;
  const { stdout } = await run(OLD_NODE, ['--version']);
  const [major, minor] = stdout.trim().slice(1).split('.').map(Number) as [number, number];
  const old = major < Number(needed[1]) || (major === Number(needed[1]) && minor < Number(needed[2]));
  return old ? stdout.trim() : undefined;
}

/** npm's script under the old Node.js: its exit status, and what it wrote to stderr. */
async function npmScript(dir: string, script: string): Promise<{ code: number; stderr: string }> {
  const env = { ...process.env, PATH: `/usr/bin:/bin`, npm_config_update_notifier: 'false' };
  try {
    const { stderr } = await run('/usr/bin/npm', ['run', script], { cwd: dir, env });
    return { code: 0, stderr };
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

test('npm start and npm install refuse an old Node.js in one line that names the version needed', async (t) => {
  const version = await oldNodeVersion();
  if (version === undefined || !existsSync('/usr/bin/npm')) return t.skip(`no Node.js older than ${needed[0]} at ${OLD_NODE}`);
  const dir = tempDir(t);
  copyFileSync(PACKAGE, join(dir, 'package.json'));
  for (const script of ['prestart', 'preinstall']) {
    const { code, stderr } = await npmScript(dir, script);
    assert.equal(code, 1, script);
    const ours = stderr.split('\n').filter((line) => line.startsWith('petstore'));
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
