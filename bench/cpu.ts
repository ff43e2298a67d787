/**
 * What a process and the machine spent, read from /proc. CPU time is what the benchmark divides by
 * the requests served: unlike requests per second, it does not fall when another tenant of a shared
 * machine takes the core for a while, because time the server does not run is not charged to it.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { basename } from 'node:path';

/** Clock ticks per second of the utime and stime fields (USER_HZ, nearly always 100). */
export const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

/** User plus system CPU time of a process, all its threads, in clock ticks. */
export function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) is in parentheses and may hold spaces: count fields after its end.
  // Field 3 (state) is the first after it, so utime (14) and stime (15) are the 12th and 13th.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(rest[11]) + Number(rest[12]);
}

/**
 * Fails unless pid is the Node.js process itself. `taskset` and the command's `#!/usr/bin/env -S node`
 * line both exec, so the child spawned is node; a wrapper left in between would be measured instead.
 */
export function assertNodeProcess(pid: number, name: string): void {
  const exe = basename(readlinkSync(`/proc/${pid}/exe`));
  const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  // The executable, not the command name: Node.js 24 names its main thread MainThread.
  if (exe !== 'node') {
    throw new Error(`${name}: process ${pid} is ${exe} (${comm}), not node: its CPU time would not be the server's`);
  }
}

/** Peak resident memory of a process (VmHWM), in MiB. */
export function peakRssMiB(pid: number): number {
  return statusMiB(pid, 'VmHWM');
}

/** Resident memory of a process now (VmRSS), in MiB. */
export function rssMiB(pid: number): number {
  return statusMiB(pid, 'VmRSS');
}

function statusMiB(pid: number, field: string): number {
  const kb = Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return kb / 1024;
}

/** One core's counters from /proc/stat, in clock ticks: all time, time idle, and time stolen by the hypervisor. */
export interface CoreTimes {
  total: number;
  idle: number;
  steal: number;
}

export function coreTimes(core: number): CoreTimes {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${core} `));
  // user nice system idle iowait irq softirq steal (guest time is already inside user)
  const f = (line ?? '').trim().split(/\s+/).slice(1, 9).map(Number);
  return { total: f.reduce((a, b) => a + b, 0), idle: (f[3] ?? 0) + (f[4] ?? 0), steal: f[7] ?? 0 };
}
