/**
 * `npm run dev`: the server from the TypeScript sources under `node --watch-path=src`, which restarts it
 * when a file under src/ changes, with its JSON log lines printed readably (pino-pretty, a development
 * dependency: the service itself always logs JSON). Configuration is the server's own: environment
 * variables and a .env file, as for `npm start`, but for SHUTDOWN_DRAIN_MS: 0 unless the environment
 * sets it. Ctrl-C, or a SIGTERM to npm, stops the watcher and
 * the server it runs; this script ends once they have.
 *
 * Plain JavaScript, like the build: it runs on every Node.js the project supports, and gives the
 * server the flags that some of them need.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pinoPretty from 'pino-pretty';
import { buildDocsAssets } from './build-docs-assets.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

// The docs page's renderer is served from assets/, which the sources do not build.
buildDocsAssets();

const flags = [
  // Any change under src/, a new file included. Watching only the modules loaded (plain --watch) misses,
  // on Linux, every save after the first of an editor that saves by replacing the file.
  '--watch-path=src',
  // Earlier lines stay on screen across a restart: the error that prompted the edit, say.
  '--watch-preserve-output',
  // As npm start passes it: node:sqlite needs it on Node.js 22.12.
  '--experimental-sqlite',
  // Type stripping is on by default from Node.js 22.18 (process.features.typescript says so).
  ...(process.features.typescript ? [] : ['--experimental-strip-types']),
];
const watcher = spawn(process.execPath, [...flags, 'src/cli/main.ts', 'serve'], {
  cwd: ROOT,
  stdio: ['inherit', 'pipe', 'inherit'],
  // A restart stops the old server at once: nothing routes to it that a drain would let notice it is going.
  env: { ...process.env, SHUTDOWN_DRAIN_MS: process.env.SHUTDOWN_DRAIN_MS ?? '0' },
});

// Lines that are not JSON (the watcher's own "Restarting ..." lines) pass through as they are.
const pretty = pinoPretty.prettyFactory({ ignore: 'pid,hostname', translateTime: 'SYS:HH:MM:ss.l', singleLine: true });
createInterface({ input: watcher.stdout, crlfDelay: Infinity }).on('line', (line) => process.stdout.write(pretty(line) ?? ''));

// A terminal's Ctrl-C reaches every process of the group; a SIGTERM reaches npm, which passes it on to
// this script alone: the watcher is told either way, and stops the server before it exits.
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => watcher.kill(signal));
watcher.on('close', (code) => process.exit(code ?? 1));
