/** One measured run of a scenario: wrk's answers, the server's CPU time from /proc, and the cores' time. */

import { join } from 'node:path';
import { CLK_TCK, coreTimes, cpuTicks, type CoreTimes } from '../cpu.ts';
import { mergeMixCounts, parseMixCounts, writeMixData, type MixCounts } from '../mix.ts';
import { wrk, type WrkReport } from '../wrk.ts';
import type { Ready } from './scenarios.ts';
import type { Server } from './servers.ts';
import { work } from './session.ts';
import { CONNECTIONS, MAX_PARTS, MIN_TICKS, SETTLE_MS } from './settings.ts';

// Measurement

export interface Sample {
  rps: number;
  requests: number;
  seconds: number;
  /** Server CPU time per answered request, µs. */
  cpuUs: number;
  /** Clock ticks the server used in the run: the resolution of cpuUs is one tick in this many. */
  ticks: number;
  /** wrk runs it took to reach MIN_TICKS (1 unless other processes kept the server off its core). */
  parts: number;
  /** Server CPU time over the run's wall time: near 1 when the load kept it busy. */
  busy: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: number;
  /** The other servers' CPU time over the run's wall time, on the same core: what idle servers cost. */
  othersBusy: number;
  /** Share of core 0's time taken by the hypervisor for other tenants. */
  steal0: number;
  /** Share of core 0 left idle: the load did not keep the server busy. */
  idle0: number;
  /** Share of core 1 (wrk's, which PostgreSQL and Redis share) that was busy. */
  busy1: number;
  mix?: MixCounts;
}

export async function measure(s: Ready, servers: Server[], seconds: number): Promise<Sample> {
  const mine = servers.indexOf(s.host);
  const run = s.runs++;
  let file = '';
  if (s.mix) {
    const d = s.host.dataset!;
    file = join(work, `mix-${s.host.name}-${run}.lua`);
    writeMixData(file, d.mix!, d.cursorSecret, run);
  }
  let ticks = 0;
  let others = 0;
  let parts = 0;
  let last: WrkReport | undefined;
  const total = { requests: 0, seconds: 0, non2xx: 0, socketErrors: 0 };
  const core0 = { total: 0, idle: 0, steal: 0 };
  const core1 = { total: 0, idle: 0, steal: 0 };
  const mixParts: MixCounts[] = [];
  // A server that other processes kept off its core for most of the run used too few clock ticks to
  // measure: the run goes on, up to MAX_PARTS times its length, until it has MIN_TICKS.
  while (parts < MAX_PARTS && (parts === 0 || ticks < MIN_TICKS)) {
    // The previous run's server closes its connections and collects its garbage just after the load
    // stops; that would otherwise land in this run, on the same core.
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const before = servers.map((sv) => cpuTicks(sv.pid));
    const [c0, c1] = [coreTimes(0), coreTimes(1)];
    last = await wrk(s.url, s.script, seconds, CONNECTIONS, s.mix ? [file, String(run * MAX_PARTS + parts + 1)] : []);
    const after = servers.map((sv) => cpuTicks(sv.pid));
    const [d0, d1] = [coreTimes(0), coreTimes(1)];
    for (const [sum, a, b] of [
      [core0, c0, d0],
      [core1, c1, d1],
    ] as const) {
      for (const k of ['total', 'idle', 'steal'] as const) sum[k] += b[k] - a[k];
    }
    servers.forEach((_, i) => (i === mine ? (ticks += after[i]! - before[i]!) : (others += after[i]! - before[i]!)));
    total.requests += last.requests;
    total.seconds += last.seconds;
    total.non2xx += last.non2xx;
    total.socketErrors += last.socketErrors;
    if (s.mix) mixParts.push(parseMixCounts(last.extra));
    parts++;
  }
  const wall = total.seconds * CLK_TCK;
  const core = (t: CoreTimes, k: 'idle' | 'steal') => t[k] / Math.max(1, t.total);
  return {
    rps: total.requests / total.seconds,
    requests: total.requests,
    seconds: total.seconds,
    cpuUs: ((ticks / CLK_TCK) * 1e6) / Math.max(1, total.requests),
    ticks,
    parts,
    busy: ticks / wall,
    // Latency of the last part: a starved first part tells only how long the server was kept waiting.
    p50Ms: last!.p50Ms,
    p99Ms: last!.p99Ms,
    non2xx: total.non2xx,
    socketErrors: total.socketErrors,
    othersBusy: others / wall,
    steal0: core(core0, 'steal'),
    idle0: core(core0, 'idle'),
    busy1: 1 - core(core1, 'idle'),
    ...(s.mix ? { mix: mergeMixCounts(mixParts) } : {}),
  };
}
