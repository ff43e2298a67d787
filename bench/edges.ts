/**
 * What hostile edges cost a real server process, measured (the figures in docs/reliability.md):
 *
 * 1. Refused uploads: a keyless POST declaring 100 GB that streams as fast as loopback allows. How
 *    long after its 401 the connection closes, and how many bytes the server read (rchar of
 *    /proc/PID/io over the exchange, so everything the process read, from any file descriptor).
 *    Then the harm to others: a keyed client's median latency for GET /v1/pets alone, and while four
 *    connections keep sending such uploads (a new one as soon as one is closed), with the server's
 *    CPU time over each period.
 * 2. One address holding connections: it opens 3,000 connections, each sending one cheap request and
 *    then idling (keep-alive). With the per-address cap (the default, 256) and without it
 *    (MAX_CONNECTIONS_PER_ADDRESS=0, MAX_CONNECTIONS=2000): how many stay open, how fast they were
 *    taken, the server's RSS per held connection, and whether another address is still served.
 *
 * Usage: node bench/edges.ts [rounds]   (3 rounds by default; min / median / max are printed)
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { keysCreate, startServerProcess } from '../test/support/processes.ts';
import { openSocket } from '../test/support/raw-http.ts';
import { tempDir } from '../test/support/temp.ts';

const rounds = Number(process.argv[2] ?? 3);

async function serve(env: Record<string, string>): Promise<{ port: number; child: ChildProcess; key: string; stop(): Promise<void> }> {
  const dir = tempDir();
  const database = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` };
  const key = await keysCreate(database, '--plan', 'enterprise', '--rpm', '1000000', '--rpd', '100000000');
  const server = await startServerProcess({ ...database, LOG_LEVEL: 'error', ...env });
  return {
    port: Number(new URL(server.url).port),
    child: server.child,
    key,
    async stop() {
      server.child.kill('SIGKILL');
      await server.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const procField = (pid: number, file: string, field: string): number =>
  Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/${file}`, 'utf8'))![1]);

/** A connection from localAddress, or undefined when none could be made (the run counts what it holds). */
function open(port: number, localAddress: string): Promise<Socket | undefined> {
  return openSocket(`http://127.0.0.1:${port}`, { localAddress }).catch(() => undefined);
}

/** One cheap request on a socket; resolves true when answered, false when the connection closed first. */
function healthz(socket: Socket): Promise<boolean> {
  return new Promise((resolve) => {
    let text = '';
    const onData = (d: Buffer) => {
      text += d.toString('latin1');
      if (text.includes('\r\n\r\n') && text.endsWith('}')) done(true);
    };
    const done = (ok: boolean) => {
      socket.off('data', onData);
      socket.off('close', onClose);
      resolve(ok);
    };
    const onClose = () => done(false);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.on('error', () => undefined);
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  });
}

async function refusedUpload(): Promise<{ closeAfterAnswerMs: number; serverReadBytes: number; clientWroteBytes: number }> {
  const server = await serve({});
  try {
    const before = procField(server.child.pid!, 'io', 'rchar');
    const socket = (await open(server.port, '127.0.0.2'))!;
    let answeredAt = 0;
    let text = '';
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (!answeredAt && text.includes('\r\n\r\n')) answeredAt = performance.now();
    });
    socket.on('error', () => undefined);
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    let open_ = true;
    void closed.then(() => (open_ = false));
    socket.write('POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n');
    const chunk = Buffer.alloc(64 * 1024);
    let written = 0;
    while (open_) {
      if (!socket.write(chunk)) await new Promise((r) => setTimeout(r, 1));
      written += chunk.length;
    }
    const closedAt = await closed;
    await new Promise((r) => setTimeout(r, 500)); // the server's side closes 0.3 s after its answer
    if (!text.startsWith('HTTP/1.1 401')) throw new Error(`unexpected answer: ${text.slice(0, 60)}`);
    return {
      closeAfterAnswerMs: closedAt - answeredAt,
      serverReadBytes: procField(server.child.pid!, 'io', 'rchar') - before,
      clientWroteBytes: written,
    };
  } finally {
    await server.stop();
  }
}

async function holdConnections(
  env: Record<string, string>,
): Promise<{ held: number; perSecond: number; kbPerConnection: number; otherServed: boolean }> {
  const server = await serve(env);
  const rssBefore = procField(server.child.pid!, 'status', 'VmRSS');
  const sockets: Socket[] = [];
  try {
    const started = performance.now();
    // 3,000 connections from one address, 100 at a time, each with one request, then left idle.
    for (let i = 0; i < 3000; i += 100) {
      const batch = await Promise.all(Array.from({ length: 100 }, () => open(server.port, '127.0.0.2')));
      const answered = await Promise.all(batch.map(async (s) => (s && (await healthz(s)) ? s : undefined)));
      for (const s of answered) if (s) sockets.push(s);
    }
    const elapsed = (performance.now() - started) / 1000;
    await new Promise((r) => setTimeout(r, 500));
    const held = sockets.filter((s) => !s.destroyed).length;
    const rssAfter = procField(server.child.pid!, 'status', 'VmRSS');
    const other = await open(server.port, '127.0.0.3');
    const otherServed = other ? await Promise.race([healthz(other), new Promise<boolean>((r) => setTimeout(() => r(false), 2000))]) : false;
    other?.destroy();
    return { held, perSecond: held / elapsed, kbPerConnection: held ? (rssAfter - rssBefore) / held : 0, otherServed };
  } finally {
    for (const s of sockets) s.destroy();
    await server.stop();
  }
}

/** One refused upload on a new connection, streamed until the server closes it. */
async function uploadOnce(port: number, stop: () => boolean): Promise<void> {
  const socket = await open(port, '127.0.0.4');
  if (!socket) return;
  socket.on('error', () => undefined);
  socket.resume();
  let closed = false;
  socket.once('close', () => (closed = true));
  socket.write('POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n');
  const chunk = Buffer.alloc(64 * 1024);
  while (!closed && !stop()) {
    if (!socket.write(chunk)) await new Promise((r) => setTimeout(r, 1));
  }
  socket.destroy();
}

/** A keyed client's median latency for GET /v1/pets over 3 s, and the server's CPU ms per second meanwhile. */
async function keyedLatency(server: { port: number; child: ChildProcess; key: string }, uploaders: number) {
  let stopping = false;
  const loops = Array.from({ length: uploaders }, async () => {
    while (!stopping) await uploadOnce(server.port, () => stopping);
  });
  const cpu = () => {
    const fields = readFileSync(`/proc/${server.child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10; // utime + stime, in ms (100 ticks a second)
  };
  await new Promise((r) => setTimeout(r, 200));
  const cpuBefore = cpu();
  const latencies: number[] = [];
  const started = performance.now();
  while (performance.now() - started < 3000) {
    const t = performance.now();
    await fetch(`http://127.0.0.1:${server.port}/v1/pets?limit=5`, { headers: { authorization: `Bearer ${server.key}` } }).then((r) =>
      r.arrayBuffer(),
    );
    latencies.push(performance.now() - t);
  }
  const cpuMsPerSecond = (cpu() - cpuBefore) / ((performance.now() - started) / 1000);
  stopping = true;
  await Promise.all(loops);
  latencies.sort((a, b) => a - b);
  return { medianMs: latencies[Math.floor(latencies.length / 2)]!, cpuMsPerSecond };
}

const spread = (values: number[], digits = 0) => {
  const sorted = [...values].sort((a, b) => a - b);
  const f = (v: number) => v.toFixed(digits);
  return `${f(sorted[0]!)} / ${f(sorted[Math.floor(sorted.length / 2)]!)} / ${f(sorted.at(-1)!)}`;
};

const uploads = [];
for (let i = 0; i < rounds; i++) uploads.push(await refusedUpload());
console.log(`Refused 100 GB upload (min / median / max over ${rounds} rounds):`);
console.log(`  closed after the 401:   ${spread(uploads.map((u) => u.closeAfterAnswerMs))} ms (client's view)`);
console.log(`  bytes the server read:  ${spread(uploads.map((u) => u.serverReadBytes))}`);
console.log(`  bytes the client wrote: ${spread(uploads.map((u) => u.clientWroteBytes))} (into socket buffers, mostly never read)`);

const alone = [];
const besieged = [];
for (let i = 0; i < rounds; i++) {
  const server = await serve({});
  try {
    alone.push(await keyedLatency(server, 0));
    besieged.push(await keyedLatency(server, 4));
  } finally {
    await server.stop();
  }
}
console.log('A keyed client, GET /v1/pets?limit=5 one after another for 3 s:');
console.log(
  `  alone:                  median ${spread(
    alone.map((r) => r.medianMs),
    2,
  )} ms, server CPU ${spread(alone.map((r) => r.cpuMsPerSecond))} ms/s`,
);
console.log(
  `  beside 4 refused uploads: median ${spread(
    besieged.map((r) => r.medianMs),
    2,
  )} ms, server CPU ${spread(besieged.map((r) => r.cpuMsPerSecond))} ms/s`,
);

for (const [label, env] of [
  ['per-address cap 256 (default)', {}],
  ['no per-address cap, MAX_CONNECTIONS=2000', { MAX_CONNECTIONS: '2000', MAX_CONNECTIONS_PER_ADDRESS: '0' }],
] as const) {
  const runs = [];
  for (let i = 0; i < rounds; i++) runs.push(await holdConnections(env));
  console.log(`One address opening 3,000 kept-alive connections, ${label}:`);
  console.log(`  held open:              ${spread(runs.map((r) => r.held))}`);
  console.log(`  held per second spent:  ${spread(runs.map((r) => r.perSecond))} connections/s`);
  console.log(
    `  server RSS per held:    ${spread(
      runs.map((r) => r.kbPerConnection),
      1,
    )} KiB`,
  );
  console.log(`  another address served: ${runs.map((r) => (r.otherServed ? 'yes' : 'no')).join(', ')}`);
}
