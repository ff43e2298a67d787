/**
 * Idle cores that poll rather than halt, for the length of a run.
 *
 * On a virtual machine a halted core is woken by an interrupt that goes through the hypervisor, and
 * the core that sends it pays: every answer a server writes to a wrk asleep on the other core costs
 * the server that wake-up, charged to it as system time. A server that answers more slowly leaves wrk
 * asleep more often, so it pays more wake-ups per request than the ceiling does (on this kind of
 * machine, 0.91 of wrk's context switches per request of the cached list against 0.48 for the
 * ceiling), and what each costs depends on the machine's idle settings rather than on the server.
 * On one machine whose idle cores halt at once, polling took the cached list from 0.38–0.39 of the
 * ceiling to 0.46 (the round that made idle cores poll, in the history of BENCHMARKS.md).
 *
 * While a process holds /dev/cpu_dma_latency open with 0 written to it (Linux's PM QoS interface,
 * which latency-sensitive benchmarks use for this), the cpuidle governor keeps idle cores in their
 * polling state, and waking a process on one is a store to memory. The request lasts as long as the
 * file stays open and ends when it is closed or the process exits; nothing is left changed. It needs
 * root: without it the run goes on with halting cores and its report says so.
 */
import { closeSync, constants, openSync, writeSync } from 'node:fs';

const PM_QOS_FILE = '/dev/cpu_dma_latency';

export interface IdlePolling {
  /** For the report: what was done, or why not. */
  readonly description: string;
  /** Lets idle cores halt again. */
  release(): void;
}

export function holdIdlePolling(): IdlePolling {
  if (process.env.BENCH_IDLE_POLL === '0') {
    return { description: 'idle cores halt (BENCH_IDLE_POLL=0)', release() {} };
  }
  let fd: number | undefined;
  try {
    fd = openSync(PM_QOS_FILE, constants.O_WRONLY);
    writeSync(fd, Buffer.alloc(4)); // the latency the run can tolerate, a 32-bit integer: 0 µs
  } catch (error) {
    if (fd !== undefined) closeSync(fd);
    const why = (error as NodeJS.ErrnoException).code ?? String(error);
    return { description: `idle cores halt (${PM_QOS_FILE} not held: ${why})`, release() {} };
  }
  const open = fd;
  let released = false;
  return {
    description: `idle cores poll (${PM_QOS_FILE} held at 0 µs)`,
    release() {
      if (released) return;
      released = true;
      closeSync(open);
    },
  };
}
