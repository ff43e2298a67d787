/** The run's settings from the environment, and the ways of starting the service it compares (bench/run.ts). */

import { join } from 'node:path';
import { launchOf, startLaunch, type Launch } from '../../scripts/start-command.ts';

export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
export const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
export const WARMUP_SECONDS = 3;
/**
 * The realistic mix runs through far more of the server's code than one repeated request, and its
 * CPU per request went on falling for some 10 s of load: on one machine 132.7, 92.5, 80.1, 74.6 and
 * 78.9 µs over five rounds after 3 s, while V8's optimising compiler took 10 % of the server's CPU in
 * the first seconds and 2.6 % after 24 (BENCHMARKS.md). The budget is about a server that has been
 * running, so the mixes warm up for longer.
 */
export const MIX_WARMUP_SECONDS = 15;
export const SETTLE_MS = 300;
/** Clock ticks a run needs for CPU per request to be known within 2 %; runs with fewer give no ratio. */
export const MIN_TICKS = 50;
/** A run short of MIN_TICKS goes on, up to this many times its length. */
export const MAX_PARTS = 3;
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
export const PG_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : undefined;
export const REDIS_PREFIX = `petstore-bench-${process.pid}-`;

/** One way of starting the service: A as `npm start` does; B, C, ... as BENCH_AB says, in the same run. */
export interface Variant {
  letter: string;
  launch: Launch;
  /** The checkout whose build runs; undefined: this one. */
  checkout: string | undefined;
}

/** How `npm start` starts the service: its variables and Node.js flags (scripts/start-command.ts). */
const START = startLaunch();
/**
 * BENCH_GUARD=<factor>: the CPU guard (bench/guard.ts). The run fails when, for any service scenario,
 * A's CPU per request over B's, paired round by round, has a median above the factor; the floor is
 * left out, and every scenario chosen must be measured.
 */
export const GUARD = process.env.BENCH_GUARD ? Number(process.env.BENCH_GUARD) : undefined;
/** BENCH_A_LAUNCH=<words>: A started otherwise than `npm start` does ('' for a bare `petstore serve`). */
const A_LAUNCH = process.env.BENCH_A_LAUNCH === undefined ? START : launchOf(process.env.BENCH_A_LAUNCH);
/** BENCH_A_SLOWDOWN=<share>: A spends that share more CPU time (bench/slowdown.mjs), to show the guard fails. */
const SLOWDOWN = process.env.BENCH_A_SLOWDOWN;
export const A: Variant = {
  letter: 'A',
  launch: SLOWDOWN
    ? {
        env: { ...A_LAUNCH.env, BENCH_SLOWDOWN: SLOWDOWN },
        flags: [`--import=${join(import.meta.dirname, 'slowdown.mjs')}`, ...A_LAUNCH.flags],
      }
    : A_LAUNCH,
  checkout: undefined,
};
/**
 * BENCH_AB: ways separated by `|`, lettered B, C, ...; BENCH_B_CHECKOUT: another checkout's build runs
 * them, as its own `npm start` does unless BENCH_AB says how.
 */
export const OTHERS: Variant[] = (() => {
  const checkout = process.env.BENCH_B_CHECKOUT;
  const launches =
    process.env.BENCH_AB !== undefined ? process.env.BENCH_AB.split('|').map(launchOf) : checkout ? [startLaunch(checkout)] : [];
  return launches.map((launch, i) => ({ letter: String.fromCharCode(66 + i), launch, checkout }));
})();
export const labelOf = (v: Variant) => (v === A ? '' : ` [${v.letter}]`);
export const serverOf = (v: Variant) => (v === A ? '' : `+${v.letter}`);
export const describeVariant = (v: Variant) =>
  `${v.letter} = ${v.checkout ?? 'this checkout'}, ` +
  ([...Object.entries(v.launch.env).map(([k, x]) => `${k}=${x}`), ...v.launch.flags].join(' ') || 'no flags');
