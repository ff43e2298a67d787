/**
 * What the caches hold under the most expensive listing a key can ask for: ~1,150 pets whose names are
 * 100 control characters (each escaped to six bytes of JSON), every cursor of a one-pet walk fetched
 * again at limit=100 in identity, gzip and br, so that every full page of the list is kept in every
 * coding. Prints the server's RSS before the fetches, after them and after 20 s idle, its peak, and the
 * caches' own byte counts and the heap's from the metrics listener. Every pet is also read by id once.
 * Usage: node bench/cache-memory.ts [--pets=1150]
 * [--idle-seconds=20]; extra environment (PAGE_CACHE_BYTES=..., PET_CACHE_BYTES=...) reaches the server.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { tempDir } from '../test/support/temp.ts';

const { values: args } = parseArgs({
  options: { pets: { type: 'string', default: '1150' }, 'idle-seconds': { type: 'string', default: '20' } },
});
const PETS = Number(args.pets);
const IDLE_MS = Number(args['idle-seconds']) * 1000;
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
  Array.from({ length: 100 }, (_, i) => String.fromCharCode(CONTROLS[(seed * 31 + i * 7) % CONTROLS.length]!)).join('');

const kib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
const status = (pid: number, field: string) =>
  Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

async function inParallel<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

const dir = tempDir();
const env = { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, LOG_LEVEL: 'warn' };
const [port, metricsPort] = [await freePort(), await freePort()];
const key = execFileSync(
  process.execPath,
  ['src/cli/main.ts', 'keys', 'create', '--plan', 'enterprise', '--rpm', '10000000', '--rpd', '100000000'],
  { env, encoding: 'utf8' },
)
  .trim()
  .split('\n')
  .at(-1)!;
const server = spawn(process.execPath, ['src/cli/main.ts', 'serve'], {
  env: { ...env, PORT: String(port), METRICS_PORT: String(metricsPort), MAX_CONNECTIONS_PER_ADDRESS: '0' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const base = `http://127.0.0.1:${port}/v1`;
const auth = { Authorization: `Bearer ${key}` };
try {
  for (let i = 0; ; i++) {
    if (
      await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (i > 100) throw new Error('the server did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const rssStart = status(server.pid!, 'VmRSS');
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
  const rssBefore = status(server.pid!, 'VmRSS');
  const fetches = cursors.flatMap((cursor) => CODINGS.map((coding) => ({ cursor, coding })));
  await inParallel(fetches, async ({ cursor, coding }) => {
    const query = cursor === undefined ? '' : `&cursor=${cursor}`;
    // undici decompresses on its own; asking for one coding alone makes the server send it.
    const answer = await fetch(`${base}/pets?limit=100${query}`, { headers: { ...auth, 'Accept-Encoding': coding } });
    await answer.arrayBuffer();
    if (answer.status !== 200) throw new Error(`list answered ${answer.status}`);
  });
  const rssAfterLists = status(server.pid!, 'VmRSS');
  // Every pet by id once (getPet), so the pet cache holds what it would.
  await inParallel(
    Array.from({ length: PETS }, (_, i) => i + 1),
    async (id) => {
      const answer = await fetch(`${base}/pets/${id}`, { headers: auth });
      await answer.arrayBuffer();
      if (answer.status !== 200) throw new Error(`get answered ${answer.status}`);
    },
  );
  const rssAfter = status(server.pid!, 'VmRSS');
  await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
  const rssIdle = status(server.pid!, 'VmRSS');
  const peak = status(server.pid!, 'VmHWM');
  const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text());
  const cacheLines = metrics.split('\n').filter((line) => /^(petstore_cache_|nodejs_heap_size_|nodejs_external_memory)/.test(line));
  console.log(`${PETS} pets, ${cursors.length} cursors, ${fetches.length} fetches at limit=100, ${PETS} by id`);
  console.log(
    `RSS at start ${kib(rssStart)}, before the fetches ${kib(rssBefore)}, after the pages ${kib(rssAfterLists)}, after the pets ${kib(rssAfter)}, after ${IDLE_MS / 1000} s idle ${kib(rssIdle)}; peak ${kib(peak)}`,
  );
  console.log(cacheLines.length ? cacheLines.join('\n') : '(no petstore_cache_ metrics)');
} finally {
  if (server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
  }
  rmSync(dir, { recursive: true, force: true });
}
