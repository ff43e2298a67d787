/** The report: the scenarios' table, the budget, the A/B and guard tables, and notes on the run. */

import { execFileSync } from 'node:child_process';
import type { Sample } from './measure.ts';
import { L, type Ready } from './scenarios.ts';
import { A, describeVariant, labelOf, MAX_PARTS, MIN_TICKS, OTHERS, SECONDS, type Variant } from './settings.ts';

// Report

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
function median(xs: number[]): number {
  const s = sorted(xs);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
const spreadOf = (xs: number[]) => ({ min: Math.min(...xs), median: median(xs), max: Math.max(...xs) });

interface Row {
  label: string;
  service: boolean;
  server: string;
  workers: number;
  rps: number;
  rpsRatio: number;
  cpuUs: { min: number; median: number; max: number };
  cpuRatio: { min: number; median: number; max: number };
  /** Rounds whose CPU time could be measured, for this scenario and the ceiling. */
  cpuRounds: number;
  p50Ms: number;
  p99Ms: number;
  busy: number;
  idle0: number;
  busy1: number;
  rssMiB: number;
  idleRssMiB: number;
  non2xx: number;
  refused429?: number;
  socketErrors: number;
  samples: Sample[];
}

export function rowOf(s: Ready, samples: Sample[], ceiling: Sample[], rssMiB: number): Row {
  const mix429 = samples.every((x) => x.mix) ? samples.reduce((a, x) => a + (x.mix!.statuses.get(429) ?? 0), 0) : undefined;
  // A round counts for CPU only when both this run and the ceiling's have enough ticks to be measured.
  const rounds = samples.flatMap((x, i) => (x.ticks >= MIN_TICKS && ceiling[i]!.ticks >= MIN_TICKS ? [{ x, c: ceiling[i]! }] : []));
  const none = { min: NaN, median: NaN, max: NaN };
  return {
    label: s.label,
    service: s.host.service,
    workers: s.host.workers,
    server: s.host.name,
    rps: median(samples.map((x) => x.rps)),
    rpsRatio: median(samples.map((x, i) => x.rps / ceiling[i]!.rps)),
    cpuUs: rounds.length ? spreadOf(rounds.map((r) => r.x.cpuUs)) : none,
    // Per round: the ceiling's CPU per request from the same round.
    cpuRatio: rounds.length ? spreadOf(rounds.map((r) => r.c.cpuUs / r.x.cpuUs)) : none,
    cpuRounds: rounds.length,
    p50Ms: median(samples.map((x) => x.p50Ms)),
    p99Ms: median(samples.map((x) => x.p99Ms)),
    busy: median(samples.map((x) => x.busy)),
    idle0: median(samples.map((x) => x.idle0)),
    busy1: median(samples.map((x) => x.busy1)),
    rssMiB,
    idleRssMiB: s.host.idleRssMiB ?? NaN,
    non2xx: samples.reduce((a, x) => a + x.non2xx, 0),
    ...(mix429 === undefined ? {} : { refused429: mix429 }),
    socketErrors: samples.reduce((a, x) => a + x.socketErrors, 0),
    samples,
  };
}

const f2 = (v: number) => v.toFixed(2);
export const pct = (v: number) => `${(100 * v).toFixed(0)} %`;
export const int = (v: number) => Math.round(v).toLocaleString('en-US');

export function scenarioTable(rows: Row[]): string[] {
  return [
    '| Scenario | CPU µs/req | CPU ratio min / median / max | req/s | req/s × ceiling | p50 ms | p99 ms | server CPU | core 0 idle | core 1 busy | idle RSS MiB | peak RSS MiB | non-2xx | 429 | socket errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map((r) =>
      [
        '',
        r.label,
        r.cpuRounds ? r.cpuUs.median.toFixed(1) : '–',
        r.cpuRounds
          ? `${f2(r.cpuRatio.min)} / **${f2(r.cpuRatio.median)}** / ${f2(r.cpuRatio.max)}` +
            (r.cpuRounds < r.samples.length ? ` (${r.cpuRounds} of ${r.samples.length} rounds)` : '')
          : `no round with ${MIN_TICKS} ticks`,
        int(r.rps),
        f2(r.rpsRatio),
        f2(r.p50Ms),
        f2(r.p99Ms),
        pct(r.busy),
        pct(r.idle0),
        pct(r.busy1),
        r.idleRssMiB.toFixed(0),
        r.rssMiB.toFixed(0),
        r.non2xx,
        r.refused429 ?? '–',
        r.socketErrors,
        '',
      ]
        .join(' | ')
        .trim(),
    ),
  ];
}

interface BudgetLine {
  line: string;
  measured: string;
  met: boolean | undefined;
}

/** The variant of a service row, by its label's suffix. */
const letterOf = (r: Row) => /\[([B-Z])\]$/.exec(r.label)?.[1] ?? 'A';

/** The budget of the service started as `npm start` does, or as another variant of BENCH_AB. */
export function budget(all: Row[], variant: Variant = A): BudgetLine[] {
  const suffix = labelOf(variant);
  const ceiling = all.find((r) => r.label === L.ceiling);
  const rows = all.filter((r) => !r.service || letterOf(r) === variant.letter);
  const get = (label: string) => rows.find((r) => r.label === label + suffix);
  const lines: BudgetLine[] = [];
  const notMeasured = (line: string) => lines.push({ line, measured: 'not measured', met: undefined });
  const ratio = (line: string, label: string, least: number) => {
    const r = get(label);
    if (!r) return notMeasured(line);
    if (!r.cpuRounds) return lines.push({ line, measured: `not measured: no round with ${MIN_TICKS} clock ticks`, met: undefined });
    lines.push({
      line,
      measured: `${f2(r.cpuRatio.median)} (${f2(r.cpuRatio.min)}–${f2(r.cpuRatio.max)})`,
      met: r.cpuRatio.median >= least,
    });
  };
  ratio('cached SQLite list (SQLite 1k: GET /v1/pets?limit=20), CPU ratio ≥ 0.50', L.sqliteList, 0.5);
  ratio('SQLite list without the page cache (1k), CPU ratio ≥ 0.25', L.sqliteNoCache, 0.25);
  ratio('getPet on SQLite, CPU ratio ≥ 0.45', L.sqliteGet, 0.45);
  ratio('getPet on PostgreSQL + Redis, CPU ratio ≥ 0.30', L.pgGet, 0.3);
  ratio('POST on SQLite, CPU ratio ≥ 0.35', L.sqlitePost, 0.35);
  ratio('POST on PostgreSQL + Redis, CPU ratio ≥ 0.15', L.pgPost, 0.15);
  ratio('PostgreSQL + Redis list (cached 1k first page), CPU ratio ≥ 0.35', L.pgList, 0.35);
  ratio('realistic mix on SQLite, CPU ratio ≥ 0.30', L.sqliteMix, 0.3);
  ratio('realistic mix on PostgreSQL + Redis, CPU ratio ≥ 0.20', L.pgMix, 0.2);
  // One worker's memory: a process of several is in the workers' table (docs/workers.md, "Memory").
  const services = rows.filter((r) => r.service && r.workers === 1);
  if (services.length) {
    const peak = services.reduce((a, r) => (r.rssMiB > a.rssMiB ? r : a));
    lines.push({
      line: 'peak RSS (max VmHWM over service processes) < 120 MiB',
      measured: `${peak.rssMiB.toFixed(1)} MiB (${peak.server}); the ceiling's ${ceiling ? ceiling.rssMiB.toFixed(1) : '–'} MiB`,
      met: peak.rssMiB < 120,
    });
  } else notMeasured('peak RSS (max VmHWM over service processes) < 120 MiB');
  for (const [engine, at1k, at1m] of [
    ['SQLite', L.sqliteList, L.sqliteList1m],
    ['PostgreSQL + Redis', L.pgList, L.pgList1m],
  ] as const) {
    const line = `${engine}: list p99 at 1M ≤ 1.2 × p99 at 1k`;
    const [a, b] = [get(at1k), get(at1m)];
    if (!a || !b) notMeasured(line);
    else lines.push({ line, measured: `${f2(b.p99Ms / a.p99Ms)} × (${f2(b.p99Ms)} / ${f2(a.p99Ms)} ms)`, met: b.p99Ms / a.p99Ms <= 1.2 });
  }
  const non2xx = services.reduce((a, r) => a + r.non2xx, 0);
  const socket = services.reduce((a, r) => a + r.socketErrors, 0);
  if (services.length) {
    lines.push({
      line: 'no unexpected non-2xx answers under load',
      measured: `${non2xx}${socket ? ` (and ${socket} socket errors)` : ''}`,
      met: non2xx === 0,
    });
  } else notMeasured('no unexpected non-2xx answers under load');
  return lines;
}

export function budgetTable(title: string, lines: BudgetLine[]): string[] {
  return [
    `| ${title} (medians over rounds) | Measured | Met |`,
    '|---|---:|---|',
    ...lines.map((b) => `| ${b.line} | ${b.measured} | ${b.met === undefined ? 'not measured' : b.met ? 'yes' : 'NO'} |`),
    '',
  ];
}

/** B's CPU per request over A's, round by round, over the rounds both could be measured in. */
function pairedRatios(a: Row, b: Row): number[] {
  return a.samples.flatMap((x, i) => {
    const y = b.samples[i]!;
    return x.ticks >= MIN_TICKS && y.ticks >= MIN_TICKS ? [y.cpuUs / x.cpuUs] : [];
  });
}

/** Each service row of A with its row in variant v. */
function pairs(rows: Row[], v: Variant): { a: Row; b: Row }[] {
  return rows
    .filter((r) => r.service && letterOf(r) === 'A')
    .flatMap((a) => {
      const b = rows.find((r) => r.label === a.label + labelOf(v));
      return b ? [{ a, b }] : [];
    });
}

/**
 * A against B, scenario by scenario: B's CPU per request over A's, paired round by round (below 1, B
 * costs less), and both processes' resident memory at start and at their peak, beside the ceiling's.
 */
export function abTable(rows: Row[], v: Variant): string[] {
  const ceiling = rows.find((r) => r.label === L.ceiling)!;
  const B = v.letter;
  const out = [
    `A/${B} in one run, rounds alternating: ${describeVariant(A)}; ${describeVariant(v)}. ` +
      `The ceiling's RSS: ${ceiling.idleRssMiB.toFixed(1)} MiB at start, ${ceiling.rssMiB.toFixed(1)} MiB at its peak.`,
    '',
    `| Scenario | CPU µs/req A | ${B} | ${B} / A per round, min / median / max | ratio to the ceiling A | ${B} | idle RSS MiB A | ${B} | peak RSS MiB A | ${B} |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const { a, b } of pairs(rows, v)) {
    const paired = pairedRatios(a, b);
    const ab = paired.length ? spreadOf(paired) : undefined;
    out.push(
      `| ${a.label} | ${a.cpuUs.median.toFixed(1)} | ${b.cpuUs.median.toFixed(1)} | ` +
        `${ab ? `${f2(ab.min)} / **${f2(ab.median)}** / ${f2(ab.max)}` : '–'} | ${f2(a.cpuRatio.median)} | ${f2(b.cpuRatio.median)} | ` +
        `${a.idleRssMiB.toFixed(0)} | ${b.idleRssMiB.toFixed(0)} | ${a.rssMiB.toFixed(0)} | ${b.rssMiB.toFixed(0)} |`,
    );
  }
  return [...out, ''];
}

/** One request's verdict, as bench/last-guard.json holds it for bench/guard.ts. */
export interface GuardLine {
  label: string;
  /** A's CPU per request over B's (this build over the reference), per round: min / median / max. */
  ratio: { min: number; median: number; max: number } | undefined;
  failed: boolean;
}

/** The guard's verdict per scenario: this build (A) over the reference (B), failing above GUARD or when not measured. */
export function guardLines(rows: Row[], limit: number): GuardLine[] {
  return pairs(rows, OTHERS[0]!).map(({ a, b }) => {
    const paired = pairedRatios(a, b).map((ba) => 1 / ba);
    const ratio = paired.length ? spreadOf(paired) : undefined;
    return { label: a.label, ratio, failed: ratio === undefined || ratio.median > limit };
  });
}

export function guardTable(lines: GuardLine[], limit: number): string[] {
  return [
    `| CPU guard: this build over the reference, per round (fails above ${f2(limit)}) | min / median / max | Passed |`,
    '|---|---:|---|',
    ...lines.map(
      (g) =>
        `| ${g.label} | ${g.ratio ? `${f2(g.ratio.min)} / **${f2(g.ratio.median)}** / ${f2(g.ratio.max)}` : 'not measured'} | ${g.failed ? 'NO' : 'yes'} |`,
    ),
    '',
  ];
}

/** What to know before trusting the figures: resolution, noise, saturation, the mix's make-up. */
export function notes(rows: Row[]): string[] {
  const all = rows.flatMap((r) => r.samples);
  const out: string[] = [];
  const enough = all.filter((x) => x.ticks >= MIN_TICKS);
  const fewest = Math.min(...enough.map((x) => x.ticks));
  out.push(
    `CPU time resolution: one clock tick in at least ${fewest} in the runs used (${(100 / fewest).toFixed(2)} % at worst); ` +
      `${all.filter((x) => x.parts > 1).length} of ${all.length} runs were extended (up to ${MAX_PARTS} × ${SECONDS} s) because ` +
      `other processes kept the server off its core; ${all.length - enough.length} still had under ${MIN_TICKS} ticks: no CPU ratio from those.`,
  );
  const steal = all.map((x) => x.steal0);
  out.push(`Core 0 time stolen by the hypervisor: median ${pct(median(steal))}, worst run ${pct(Math.max(...steal))}.`);
  out.push(`Idle servers' CPU on core 0 during another's run: at most ${pct(Math.max(...all.map((x) => x.othersBusy)))} of the core.`);
  // Below 90 % of the core, either the core sat idle (the load did not keep the server busy: it waited on
  // the database, or on wrk, whose core PostgreSQL and Redis share) or other processes had it.
  const starved = rows.filter((r) => r.busy < 0.9);
  const waiting = starved
    .filter((r) => r.idle0 >= 0.1)
    .map((r) => `${r.label} (${pct(r.busy)}, core 0 idle ${pct(r.idle0)}, core 1 ${pct(r.busy1)})`);
  const shared = starved.filter((r) => r.idle0 < 0.1).map((r) => `${r.label} (${pct(r.busy)})`);
  if (waiting.length) out.push(`Server under 90 % of its core with core 0 idle, so the load did not keep it busy: ${waiting.join('; ')}.`);
  if (shared.length) {
    out.push(
      `Server under 90 % of its core with core 0 busy: other processes, or the kernel's network work (softirq, charged to ` +
        `no process), took the rest: ${shared.join('; ')}.`,
    );
  }
  const unstable = rows
    .filter((r) => (r.cpuUs.max - r.cpuUs.min) / r.cpuUs.median > 0.1)
    .map((r) => `${r.label} (${r.cpuUs.min.toFixed(1)}–${r.cpuUs.max.toFixed(1)} µs)`);
  if (unstable.length) out.push(`CPU per request varied by more than 10 % over rounds: ${unstable.join('; ')}.`);
  for (const r of rows.filter((x) => x.samples.some((s) => s.mix))) {
    const kinds = new Map<string, number>();
    const statuses = new Map<number, number>();
    let unmatched = 0;
    let ended = 0;
    for (const s of r.samples) {
      s.mix!.kinds.forEach((n, k) => kinds.set(k, (kinds.get(k) ?? 0) + n));
      s.mix!.statuses.forEach((n, k) => statuses.set(k, (statuses.get(k) ?? 0) + n));
      unmatched += s.mix!.unmatched;
      ended += s.mix!.walksEnded;
    }
    const total = [...kinds.values()].reduce((a, n) => a + n, 0);
    const made = ['list', 'get', 'create'].map((k) => `${k} ${pct((kinds.get(k) ?? 0) / Math.max(1, total))}`).join(', ');
    const codes = [...statuses]
      .sort(([a], [b]) => a - b)
      .map(([code, n]) => `${code}: ${int(n)}`)
      .join(', ');
    out.push(
      `${r.label}: answers ${made}; by status ${codes}; ${int(ended)} walks reached the last page; ${unmatched} answers not matched to a client.`,
    );
  }
  return out.map((l) => `- ${l}`);
}

export function commit(): string {
  const git = (...args: string[]) => execFileSync('git', args).toString().trim();
  try {
    return git('rev-parse', '--short', 'HEAD') + (git('status', '--porcelain') ? '+dirty' : '');
  } catch {
    return 'unknown';
  }
}
