/** One wrk run, pinned to core 1, and what its report says. */
import { execFile, type ChildProcess } from 'node:child_process';

export interface WrkReport {
  /** Requests wrk saw answered ("N requests in ..."): the divisor of CPU time per request. */
  requests: number;
  /** The run's length as wrk measured it. */
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Answers with a status above 399: wrk counts 1xx to 3xx (a 304 too) as successes. */
  non2xx: number;
  /** connect, read, write and timeout errors: requests that never got an answer. */
  socketErrors: number;
  /** Lines a script's done() printed after wrk's own report. */
  extra: string[];
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const toMs = (value: string, unit: string) => Number(value) * UNIT_MS[unit]!;

let running: ChildProcess | undefined;

/** Stops a run under way (on interrupt), so nothing keeps loading a server being shut down. */
export function stopWrk(): void {
  running?.kill('SIGTERM');
}

export async function wrk(url: string, script: string, seconds: number, connections: number, args: string[] = []): Promise<WrkReport> {
  const argv = ['-c', '1', 'wrk', '-t1', `-c${connections}`, `-d${seconds}s`, '--latency', '-s', script, url];
  if (args.length) argv.push('--', ...args);
  const out = await new Promise<string>((resolve, reject) => {
    running = execFile('taskset', argv, { maxBuffer: 16 * 2 ** 20 }, (err, stdout, stderr) => {
      running = undefined;
      if (err) reject(new Error(`wrk failed on ${url}: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
  const match = (re: RegExp) => {
    const m = re.exec(out);
    if (!m) throw new Error(`wrk's report has no ${re}:\n${out}`);
    return m;
  };
  const latency = (pct: string) => {
    const m = match(new RegExp(`^\\s+${pct}%\\s+([\\d.]+)(us|ms|s|m|h)\\s*$`, 'm'));
    return toMs(m[1]!, m[2]!);
  };
  const done = match(/^\s+(\d+) requests in ([\d.]+)(us|ms|s|m|h),/m);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const afterReport = out.slice(out.indexOf('Transfer/sec:'));
  return {
    requests: Number(done[1]),
    seconds: toMs(done[2]!, done[3]!) / 1000,
    rps: Number(match(/Requests\/sec:\s+([\d.]+)/)[1]),
    p50Ms: latency('50'),
    p99Ms: latency('99'),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    socketErrors: socket ? socket.slice(1).reduce((a, n) => a + Number(n), 0) : 0,
    extra: afterReport.split('\n').slice(1).filter(Boolean),
  };
}

/** A Lua string literal holding text exactly (Lua 5.1 has decimal byte escapes, not \u). */
export function luaString(text: string): string {
  const bytes = [...Buffer.from(text, 'utf8')];
  return '"' + bytes.map((b) => (b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c ? String.fromCharCode(b) : `\\${b}`)).join('') + '"';
}
