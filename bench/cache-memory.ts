/**
 * What the caches cost in memory under the most expensive listing a key can ask for, with the caches on
 * and off in the same run, for this build and, with --reference DIR, another checkout's build beside it.
 * Each server starts as its own `npm start` starts it. The workload: PETS pets whose names are 99
 * control characters (each escaped to six bytes of JSON) and one two-byte character (so V8 keeps
 * the whole name as two-byte text), every cursor of a one-pet walk fetched again at limit=100 in
 * identity, gzip and br, so that every full page is kept in every coding, and every pet read by id.
 * Prints each server's RSS at start, after the workload and at its peak, and the growth with the
 * caches on over the growth with them off.
 * Usage: node bench/cache-memory.ts [--pets=1000] [--reference=DIR]; extra environment (PAGE_CACHE_BYTES=...) reaches the servers.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startLaunch, type Launch } from '../scripts/start-command.ts';
import { tempDir } from '../test/support/temp.ts';
import { peakRssMiB, rssMiB } from './cpu.ts';

const { values: args } = parseArgs({
  options: { pets: { type: 'string', default: '1000' }, reference: { type: 'string' } },
});
const PETS = Number(args.pets);
const CONCURRENCY = 8;
const CODINGS = ['identity', 'gzip', 'br'] as const;

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

/** Control characters that are not white space, so the name is valid; JSON escapes each as \u00XX. */
const CONTROLS = [...Array.from({ length: 8 }, (_, i) => i + 1), ...Array.from({ length: 18 }, (_, i) => i + 14)];
const hostileName = (seed: number) =>
  Array.from({ length: 99 }, (_, i) => String.fromCharCode(CONTROLS[(seed * 31 + i * 7) % CONTROLS.length]!)).join('') + '\u20ac';

async function inParallel<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

/** The variables that turn a build's caches off: its page cache (by bytes, or by count before that) and its pet cache. */
function cachesOff(checkout: string): Record<string, string> {
  const config = readFileSync(join(checkout, 'dist/config.js'), 'utf8');
  if (!config.includes('PAGE_CACHE_BYTES')) return { PAGE_CACHE_SIZE: '0' };
  return { PAGE_CACHE_BYTES: '0', ...(config.includes('PET_CACHE_BYTES') ? { PET_CACHE_BYTES: '0' } : {}) };
}

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
  const auth = { Authorization: `Bearer ${key}` };
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
    await inParallel(
      Array.from({ length: PETS }, (_, i) => i),
      async (i) => {
        const answer = await fetch(`${base}/pets`, {
          method: 'POST',
          headers: { ...auth, 'Content-Type': 'application/json' },
          body: JSON.stringify({ name: hostileName(i), categoryId: 1 }),
        });
        if (answer.status !== 201) throw new Error(`create answered ${answer.status}: ${await answer.text()}`);
      },
    );
    // A one-pet walk gives a cursor after every pet; each opens its own 100-pet page.
    const cursors: (string | undefined)[] = [undefined];
    for (let url: string | undefined = `${base}/pets?limit=1`; url;) {
      const answer = await fetch(url, { headers: auth });
      await answer.arrayBuffer();
      const next = /<([^>]+)>; rel="next"/.exec(answer.headers.get('link') ?? '')?.[1];
      if (next) cursors.push(new URL(next, base).searchParams.get('cursor')!);
      url = next && new URL(next, base).href;
    }
    const fetches = cursors.flatMap((cursor) => CODINGS.map((coding) => ({ cursor, coding })));
    await inParallel(fetches, async ({ cursor, coding }) => {
      const query = cursor === undefined ? '' : `&cursor=${cursor}`;
      // undici decompresses on its own; asking for one coding alone makes the server send it.
      const answer = await fetch(`${base}/pets?limit=100${query}`, { headers: { ...auth, 'Accept-Encoding': coding } });
      await answer.arrayBuffer();
      if (answer.status !== 200) throw new Error(`list answered ${answer.status}`);
    });
    await inParallel(
      Array.from({ length: PETS }, (_, i) => i + 1),
      async (id) => {
        const answer = await fetch(`${base}/pets/${id}`, { headers: auth });
        await answer.arrayBuffer();
        if (answer.status !== 200) throw new Error(`get answered ${answer.status}`);
      },
    );
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
