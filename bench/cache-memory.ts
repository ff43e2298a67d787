/**
 * What the caches cost in memory under the most expensive listing a key can ask for, with the caches on
 * and off in the same run, for this build and, with --reference DIR, another checkout's build beside it.
 * Each server starts as its own `npm start` starts it. The workload (test/support/hostile-listing.ts):
 * PETS pets whose names are 99 control characters (each escaped to six bytes of JSON) and one two-byte
 * character, every cursor of a one-pet walk fetched again at limit=100 in identity, gzip and br, so
 * that every full page is kept in every coding, and every pet read by id.
 * Prints each server's RSS at start, after the workload and at its peak, and the growth with the
 * caches on over the growth with them off.
 * Usage: node bench/cache-memory.ts [--pets=1000] [--reference=DIR]; extra environment (PAGE_CACHE_BYTES=...) reaches the servers.
 */
import { execFileSync, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startLaunch, type Launch } from '../scripts/start-command.ts';
import { CODINGS, hostileListing } from '../test/support/hostile-listing.ts';
import { tempDir } from '../test/support/temp.ts';
import { cachesOff } from './cache-switches.ts';
import { peakRssMiB, rssMiB } from './cpu.ts';

const { values: args } = parseArgs({
  options: { pets: { type: 'string', default: '1000' }, reference: { type: 'string' } },
});
const PETS = Number(args.pets);
const CONCURRENCY = 8;

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

interface Measured {
  startMiB: number;
  afterMiB: number;
  peakMiB: number;
}

async function workload(checkout: string, launch: Launch, extra: Record<string, string>): Promise<Measured> {
  const dir = tempDir();
  const cli = join(checkout, 'dist/cli/main.js');
  const env = { ...process.env, ...launch.env, DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, LOG_LEVEL: 'warn', ...extra };
  const port = await freePort();
  const key = execFileSync(
    process.execPath,
    [...launch.flags, cli, 'keys', 'create', '--plan', 'enterprise', '--rpm', '10000000', '--rpd', '100000000'],
    { env, encoding: 'utf8' },
  )
    .trim()
    .split('\n')
    .at(-1)!;
  const server = spawn(process.execPath, [...launch.flags, cli, 'serve'], {
    env: { ...env, PORT: String(port), MAX_CONNECTIONS_PER_ADDRESS: '0' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}/v1`;
  try {
    for (let i = 0; ; i++) {
      const up = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      if (i > 100) throw new Error('the server did not start');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const startMiB = rssMiB(server.pid!);
    await hostileListing({ base, key, pets: PETS, concurrency: CONCURRENCY });
    return { startMiB, afterMiB: rssMiB(server.pid!), peakMiB: peakRssMiB(server.pid!) };
  } finally {
    if (server.exitCode === null) {
      server.kill('SIGTERM');
      await new Promise((resolve) => server.once('exit', resolve));
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

const builds = [{ name: 'this build', checkout: '.' }, ...(args.reference ? [{ name: args.reference, checkout: args.reference }] : [])];
const rows: string[] = [];
for (const { name, checkout } of builds) {
  const launch = startLaunch(checkout);
  const offEnv = cachesOff(checkout);
  const on = await workload(checkout, launch, {});
  const off = await workload(checkout, launch, offEnv);
  const line = (caches: string, m: Measured) =>
    `| ${name} | ${caches} | ${m.startMiB.toFixed(1)} | ${m.afterMiB.toFixed(1)} | ${(m.afterMiB - m.startMiB).toFixed(1)} | ${m.peakMiB.toFixed(1)} |`;
  rows.push(line('on', on), line(`off (${Object.keys(offEnv).join(', ')} = 0)`, off));
  rows.push(`| ${name} | growth on over off | | | **${(on.afterMiB - on.startMiB - (off.afterMiB - off.startMiB)).toFixed(1)}** | |`);
}
console.log(
  [
    `${PETS} pets of hostile names, ${PETS + 1} pages of 100 in ${CODINGS.length} codings, every pet by id; RSS in MiB`,
    '',
    '| Build | Caches | at start | after the workload | growth | peak |',
    '|---|---|---:|---:|---:|---:|',
    ...rows,
  ].join('\n'),
);
