/**
 * Debian's Prometheus (apt-get install prometheus) run by a test: a configuration, data folder and port
 * of the test's own (never the :9090 that installing the package may have started), scraping the given
 * targets and evaluating the given rule files every second; and promtool beside it. Read through its
 * HTTP API. A test without them is skipped loudly, and fails under CI=true, where they must be.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './processes.ts';
import { atEnd, killAtExit, type Owner } from './temp.ts';
import { eventually } from './waiting.ts';

export const PROMETHEUS = '/usr/bin/prometheus';
export const PROMTOOL = '/usr/bin/promtool';

/**
 * Why a test of `what` cannot run here, said loudly (a failure under CI=true, where it must run); false
 * when Prometheus and promtool are installed. For node:test's `skip` option.
 */
export function prometheusMissing(what: string): string | false {
  const missing = [PROMETHEUS, PROMTOOL].filter((path) => !existsSync(path));
  if (missing.length === 0) return false;
  const why = `${missing.join(' and ')} not installed (apt-get install -y prometheus)`;
  console.log('#'.repeat(70) + `\n# SKIPPED: ${what} (${why})\n` + '#'.repeat(70));
  if (process.env.CI === 'true') assert.fail(`CI=true: ${what} cannot run: ${why}`);
  return why;
}

/** One answer of /api/v1/query: a vector's samples, or the error Prometheus gave. */
export interface QueryAnswer {
  status: 'success' | 'error';
  error?: string;
  data?: { resultType: string; result: { metric: Record<string, string>; value?: [number, string] }[] };
}

/** An alert as /api/v1/alerts lists it. */
export interface ActiveAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  value: string;
}

/** A rule as /api/v1/rules lists it, with how its last evaluation went. */
export interface LoadedRule {
  name: string;
  query: string;
  health: string;
  lastError?: string;
  /** When it was last evaluated (RFC 3339). */
  lastEvaluation: string;
}

export interface RunningPrometheus {
  url: string;
  query(expr: string): Promise<QueryAnswer>;
  alerts(): Promise<ActiveAlert[]>;
  rules(): Promise<LoadedRule[]>;
  /** What it logged so far, for a failure's message. */
  output(): string;
  stop(): Promise<void>;
}

export interface PrometheusOptions {
  /** host:port of each target, scraped at /metrics every second. */
  targets: string[];
  /** The job label its targets get. */
  job: string;
  ruleFiles: string[];
  /** Stops it when this test or suite ends. */
  owner: Owner;
}

/** Prometheus on a free port of 127.0.0.1 with its files in dir, once it is ready. */
export async function startPrometheus(dir: string, options: PrometheusOptions): Promise<RunningPrometheus> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const config = join(dir, 'prometheus.yml');
  const data = join(dir, 'prometheus-data');
  mkdirSync(data, { recursive: true });
  // JSON is YAML: no quoting of paths to get wrong.
  writeFileSync(
    config,
    JSON.stringify({
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: options.ruleFiles,
      scrape_configs: [{ job_name: options.job, static_configs: [{ targets: options.targets }] }],
    }),
  );
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [`--config.file=${config}`, `--storage.tsdb.path=${data}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  killAtExit(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  atEnd(options.owner, stop);

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(10_000) });
    return (await res.json()) as T;
  };
  try {
    await eventually(async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}`);
      return (await fetch(`${url}/-/ready`).catch(() => undefined))?.status === 200;
    }, 30_000);
  } catch (err) {
    await stop();
    throw new Error(`prometheus did not start (${(err as Error).message}):\n${output}`, { cause: err });
  }
  return {
    url,
    query: (expr) => api<QueryAnswer>(`/api/v1/query?query=${encodeURIComponent(expr)}`),
    alerts: async () => (await api<{ data: { alerts: ActiveAlert[] } }>('/api/v1/alerts')).data.alerts,
    rules: async () => (await api<{ data: { groups: { rules: LoadedRule[] }[] } }>('/api/v1/rules')).data.groups.flatMap((g) => g.rules),
    output: () => output,
    stop,
  };
}
