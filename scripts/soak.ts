/**
 * `npm run soak`: sustained load on one server process, as built (`dist/`), on SQLite.
 *
 * SOAK_CONNECTIONS (256) keep-alive connections send, for SOAK_SECONDS (60), a mix of first pages,
 * next pages (followed through the Link header), creates and gets with an Enterprise key whose limits
 * the run cannot reach; a few more connections send with a Free key that is refused with 429 on
 * purpose (slowly enough that it never earns a ban), so rate limiting is exercised under load too.
 *
 * It prints requests, req/s, answers by status, p50/p99 latency and the server's RSS after warm-up
 * and at the end, and exits 1 when any answer is other than 2xx (or 429 for the Free key), any
 * connection fails, RSS grows by more than RSS_GROWTH_LIMIT_MIB between warm-up and end, or the
 * server does not exit 0 within 10 s of SIGTERM.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startLaunch } from './start-command.ts';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 256);
const WARM_UP_SECONDS = 5;
const RSS_GROWTH_LIMIT_MIB = 64;
const PORT = 19_700 + (process.pid % 200);
const CLI = 'dist/cli/main.js';

const work = mkdtempSync(join(tmpdir(), 'petstore-soak-'));
// Every simulated client connects from 127.0.0.1: the per-address connection cap is lifted above them.
const env = {
  ...process.env,
  DATABASE_URL: `sqlite:${join(work, 'soak.db')}`,
  PORT: String(PORT),
  HOST: '127.0.0.1',
  LOG_LEVEL: 'warn',
  MAX_CONNECTIONS_PER_ADDRESS: String(CONNECTIONS + 16),
};
const makeKey = (...args: string[]) =>
  execFileSync(process.execPath, [CLI, 'keys', 'create', ...args], { env })
    .toString()
    .trim()
    .split('\n')
    .at(-1)!;
const enterprise = makeKey('--plan', 'enterprise', '--rpm', '1000000000', '--rpd', '1000000000');
const free = makeKey('--plan', 'free');

// The server runs as `npm start` runs it (its variables and Node.js flags), on this Node.js.
const launch = startLaunch();
const server = spawn(process.execPath, [...launch.flags, CLI, 'serve'], {
  env: { ...env, ...launch.env },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)));
const rssMiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))![1]) / 1024;

const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS + 8 });
interface Answer {
  status: number;
  link: string | undefined;
  body: string;
}
function send(method: string, path: string, key: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body) headers['content-type'] = 'application/json';
    const req = request({ host: '127.0.0.1', port: PORT, method, path, headers, agent }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, link: res.headers.link as string | undefined, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const byStatus = new Map<string, number>();
const failures = new Map<string, number>();
const latencies: number[] = [];
let measuring = false;
const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);

async function timed(what: string, method: string, path: string, key: string, body?: string): Promise<Answer | undefined> {
  const started = performance.now();
  try {
    const answer = await send(method, path, key, body);
    if (measuring) latencies.push(performance.now() - started);
    count(byStatus, `${what} ${answer.status}`);
    return answer;
  } catch (err) {
    count(failures, `${what}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    return undefined;
  }
}

async function client(n: number, until: number): Promise<void> {
  const ids: string[] = [];
  let next: string | undefined;
  for (let i = 0; Date.now() < until; i++) {
    const step = i % 4;
    if (step === 0) {
      const a = await timed('create', 'POST', '/v1/pets', enterprise, JSON.stringify({ name: `soak ${n}-${i}`, categoryId: i + 1 }));
      if (a?.status === 201) ids.push(String(JSON.parse(a.body).id));
    } else if (step === 1 && ids.length > 0) {
      await timed('get', 'GET', `/v1/pets/${ids[i % ids.length]}`, enterprise);
    } else {
      const a = await timed('list', 'GET', next ?? '/v1/pets?limit=20', enterprise);
      next = /<([^>]+)>; rel="next"/.exec(a?.link ?? '')?.[1];
    }
  }
}

/**
 * The Free key's client (60 a minute): a burst of 70 requests in each minute window the run touches,
 * so 10 per window are refused, well below the ban threshold of 20 refusals.
 */
async function freeClient(until: number): Promise<void> {
  while (Date.now() < until) {
    if (new Date().getUTCSeconds() >= 57) await sleep(4000); // keep each burst inside one window
    for (let i = 0; i < 70 && Date.now() < until; i++) await timed('free-key', 'GET', '/v1/pets?limit=5', free);
    const nextWindow = Math.ceil(Date.now() / 60_000) * 60_000 + 100;
    await sleep(Math.max(0, Math.min(nextWindow, until) - Date.now()));
  }
}

async function main(): Promise<number> {
  for (let tries = 0; ; tries++) {
    try {
      if ((await send('GET', '/healthz', '')).status === 200) break;
    } catch {
      if (tries > 100) throw new Error('the server did not start');
    }
    await sleep(100);
  }
  const start = Date.now();
  const until = start + SECONDS * 1000;
  const load = Promise.all([...Array.from({ length: CONNECTIONS }, (_, n) => client(n, until)), freeClient(until)]);
  await sleep(WARM_UP_SECONDS * 1000);
  const rssWarm = rssMiB();
  measuring = true;
  const measuredFrom = Date.now();
  await load;
  const measuredSeconds = (Date.now() - measuredFrom) / 1000;
  const rssEnd = rssMiB();
  agent.destroy();

  server.kill('SIGTERM');
  const code = await Promise.race([exited, sleep(10_000).then(() => 'timeout')]);

  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!.toFixed(1);
  const total = [...byStatus.values()].reduce((a, b) => a + b, 0);
  const unexpected = [...byStatus].filter(([k]) => !/ 2\d\d$/.test(k) && k !== 'free-key 429');
  console.log(
    [
      `soak: ${SECONDS} s, ${CONNECTIONS} connections (+1 Free key client), one server on SQLite`,
      `answers: ${total}, ${(latencies.length / measuredSeconds).toFixed(0)} req/s after warm-up`,
      `by status: ${[...byStatus].map(([k, v]) => `${k}: ${v}`).join(', ')}`,
      `connection errors: ${failures.size ? [...failures].map(([k, v]) => `${k} × ${v}`).join(', ') : 'none'}`,
      `latency after warm-up: p50 ${pct(50)} ms, p99 ${pct(99)} ms`,
      `server RSS: ${rssWarm.toFixed(0)} MiB after ${WARM_UP_SECONDS} s warm-up, ${rssEnd.toFixed(0)} MiB at the end`,
      `SIGTERM: exit ${code}`,
    ].join('\n'),
  );
  const problems = [
    ...unexpected.map(([k, v]) => `unexpected answers ${k} × ${v}`),
    ...[...failures].map(([k, v]) => `connection error ${k} × ${v}`),
    ...(byStatus.get('free-key 429') ? [] : ['the Free key was never refused: rate limiting was not exercised']),
    ...(rssEnd - rssWarm > RSS_GROWTH_LIMIT_MIB
      ? [`RSS grew by ${(rssEnd - rssWarm).toFixed(0)} MiB (limit ${RSS_GROWTH_LIMIT_MIB})`]
      : []),
    ...(code === 0 ? [] : [`the server did not exit 0 on SIGTERM (${code})`]),
  ];
  for (const p of problems) console.error(`FAIL: ${p}`);
  return problems.length ? 1 : 0;
}

try {
  process.exitCode = await main();
} finally {
  if (server.exitCode === null) server.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
process.exit();
