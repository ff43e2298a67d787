/**
 * One worker against two (WORKERS, docs/workers.md): for the cached list, getPet and creates on SQLite, requests per
 * second and CPU time per request of each, paired round by round, and the server's CPU share. On a two-core machine
 * the second worker shares core 1 with wrk, so two workers cannot reach twice one's rate here: the CPU per request
 * says what coordination costs, the share says how much of the two cores the server got.
 */
import { L } from './scenarios.ts';
import type { Sample } from './measure.ts';

interface Measured {
  label: string;
  samples: Sample[];
  rssMiB: number;
}

const PAIRS = [
  ['cached list', L.sqliteList, L.workersList],
  ['getPet', L.sqliteGet, L.workersGet],
  ['POST', L.sqlitePost, L.workersPost],
] as const;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const show = (x: number, digits: number) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const spread = (xs: number[], digits: number) =>
  `${show(median(xs), digits)} (${show(Math.min(...xs), digits)}–${show(Math.max(...xs), digits)})`;

export function workersTable(rows: Measured[]): string[] {
  const lines: string[] = [];
  for (const [what, one, two] of PAIRS) {
    const a = rows.find((r) => r.label === one);
    const b = rows.find((r) => r.label === two);
    if (!a || !b) continue;
    const n = Math.min(a.samples.length, b.samples.length);
    const rounds = Array.from({ length: n }, (_, i) => ({ a: a.samples[i]!, b: b.samples[i]! }));
    lines.push(
      `| ${what} | ${spread(
        rounds.map((r) => r.a.rps),
        0,
      )} | ${spread(
        rounds.map((r) => r.b.rps),
        0,
      )} | ${spread(
        rounds.map((r) => r.b.rps / r.a.rps),
        2,
      )} | ${spread(
        rounds.map((r) => r.a.cpuUs),
        1,
      )} | ${spread(
        rounds.map((r) => r.b.cpuUs),
        1,
      )} | ${spread(
        rounds.map((r) => r.b.busy),
        2,
      )} | ${a.rssMiB.toFixed(0)} / ${b.rssMiB.toFixed(0)} |`,
    );
  }
  if (lines.length === 0) return [];
  return [
    '',
    '### One worker against two (SQLite 1k)',
    '',
    'Medians over rounds with their spread; ratios paired round by round. One worker runs on core 0; two on cores 0 and 1, ' +
      "the second sharing core 1 with wrk. Server CPU share: the server's CPU time over the run's wall time, in cores.",
    '',
    '| Request | req/s, 1 worker | req/s, 2 workers | 2 over 1 | CPU µs/req, 1 worker | CPU µs/req, 2 workers | Server CPU share, 2 workers | peak RSS MiB, 1 / 2 workers |',
    '|---|---|---|---|---|---|---|---|',
    ...lines,
  ];
}
