/**
 * How many cores the process may use: the CPUs its affinity allows (os.availableParallelism), fewer when a
 * cgroup CPU quota allows less (a container's `cpus:` or a Kubernetes CPU limit), rounded up, as a quota of
 * 1.5 cores keeps two workers busy part of the time rather than one all of it. WORKERS defaults to this.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/** The process's cgroup paths, by controller ('' for cgroup v2's unified hierarchy). */
function cgroupPaths(procSelfCgroup: string): Map<string, string> {
  const paths = new Map<string, string>();
  for (const line of procSelfCgroup.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    for (const controller of match[1]!.split(',')) paths.set(controller, match[2]!);
  }
  return paths;
}

/** Cores the quota allows (a fraction), or undefined when there is none: cgroup v2's cpu.max, else v1's CFS files. */
export function quotaCores(read: (path: string) => string | undefined = readOrUndefined): number | undefined {
  const self = read('/proc/self/cgroup');
  if (self === undefined) return undefined;
  const paths = cgroupPaths(self);
  const unified = paths.get('');
  if (unified !== undefined) {
    const max = read(`/sys/fs/cgroup${unified === '/' ? '' : unified}/cpu.max`)
      ?.trim()
      .split(/\s+/);
    if (max && max[0] !== 'max') {
      const [quota, period] = [Number(max[0]), Number(max[1] ?? 100_000)];
      if (quota > 0 && period > 0) return quota / period;
    }
  }
  const v1 = paths.get('cpu');
  if (v1 !== undefined) {
    const dir = `/sys/fs/cgroup/cpu${v1 === '/' ? '' : v1}`;
    const quota = Number(read(`${dir}/cpu.cfs_quota_us`)?.trim());
    const period = Number(read(`${dir}/cpu.cfs_period_us`)?.trim());
    if (quota > 0 && period > 0) return quota / period;
  }
  return undefined;
}

function readOrUndefined(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The cores the process may use: its affinity's, capped by its cgroup's quota (rounded up), at least 1. */
export function usableCores(affinity = availableParallelism(), quota = quotaCores()): number {
  return Math.max(1, quota === undefined ? affinity : Math.min(affinity, Math.ceil(quota)));
}
