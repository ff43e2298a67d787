/**
 * The shipped alert rules (deploy/prometheus/alerts.yml) at the scrape intervals operators run, 15 s,
 * 30 s and 1 minute (Prometheus's default), each scraped off the rules' beat as a real Prometheus does:
 * scrapes start at an offset the evaluations do not share, and rules are evaluated every 15 s and every
 * minute. Each case is a model of what the targets report over time; it is sampled at each interval and
 * offset into a promtool unit test (`_` where no scrape fell, `stale` where a target stopped answering),
 * which checks that the alert fires by a given minute, or never fires at all. Quiet cases include a
 * rolling restart (a missed scrape, counters back at 0), a lock-wait burst of failed creates and another
 * application's target in a shared Prometheus. The rules' copy keeps every expression and for:, and
 * drops the annotations, which alerts.test.yml checks.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { alertRules } from '../../scripts/alert-rules.ts';
import { PROMTOOL, prometheusMissing } from '../support/prometheus.ts';
import { tempDir } from '../support/temp.ts';

const RULES = fileURLToPath(new URL('../../deploy/prometheus/alerts.yml', import.meta.url));

/**
 * What one target reports at second t: undefined while it does not answer its scrapes (up 0), null once
 * service discovery no longer lists it (no series at all, up included).
 */
type Reading = Record<string, number> | undefined | null;

interface Target {
  labels: Record<string, string>;
  /** Series name with its own labels (`name{a="b"}`) to value, at second t; undefined while down. */
  read(t: number): Reading;
}

interface Case {
  name: string;
  alert: string;
  minutes: number;
  targets: Target[];
  /** Fires by this minute and is still firing at the end, with these labels (severity from the rule); absent: never fires. */
  fires?: { by: number; labels: Record<string, string> };
}

const M = 60;
const petstore = (n: number, extra: Record<string, string> = {}) => ({
  job: 'petstore',
  instance: `10.0.0.${n}:9464`,
  ...extra,
});

/** Requests counted since a process started at `since` (seconds), at `perMinute`. */
const counted = (t: number, since: number, perMinute: number) => Math.floor(((t - since) * perMinute) / M);

/** An instance started at second 0 and again at each of `restarts`, down for `downFor` seconds before each start. */
function instance(
  n: number,
  restarts: number[],
  downFor: number,
  series: (t: number, started: number) => Record<string, number>,
  extra: Record<string, string> = {},
): Target {
  return {
    labels: petstore(n, extra),
    read(t) {
      if (restarts.some((r) => t >= r - downFor && t < r)) return undefined;
      const started = Math.max(0, ...restarts.filter((r) => r <= t));
      return { process_start_time_seconds: 1_700_000_000 + started, petstore_ready: 1, ...series(t, started) };
    },
  };
}

/** createPet answers: `ok` and `failing` 503s a minute, from each start; `failing` may depend on t. */
const creates = (t: number, started: number, ok: number, failed: (t: number) => number) => ({
  'petstore_http_requests_total{operation="createPet", status="201"}': counted(t, started, ok),
  'petstore_http_requests_total{operation="createPet", status="503"}': failed(t),
  'petstore_http_requests_total{operation="listPets", status="200"}': counted(t, started, 1000),
});

/** A latency histogram of createPet with `slow` of its answers between 0.5 and 1 s, the rest under 0.1 s. */
const latencies = (t: number, started: number, slow: number) => {
  const all = counted(t, started, 1000);
  const late = Math.floor(all * slow);
  const bucket = (le: string, n: number) => [`petstore_http_request_duration_seconds_bucket{operation="createPet", le="${le}"}`, n];
  return Object.fromEntries([bucket('0.1', all - late), bucket('0.5', all - late), bucket('1', all), bucket('+Inf', all)]);
};

/** kube-state-metrics' target, with the restarts it counts of the service's container. */
const kubeRestarts = (restarts: (t: number) => number): Target => ({
  labels: { job: 'kube-state-metrics', instance: '10.0.9.9:8080' },
  read: (t) => ({ 'kube_pod_container_status_restarts_total{namespace="shop", pod="petstore-7d9-x2", container="petstore"}': restarts(t) }),
});

const CASES: Case[] = [
  {
    name: '30 failed creates a minute for 30 minutes, among 1000 reads a minute',
    alert: 'PetstoreStorageWritesFailing',
    minutes: 30,
    targets: [instance(1, [], 0, (t, s) => creates(t, s, 20, (t) => (t < 2 * M ? 0 : counted(t, 2 * M, 30))))],
    fires: { by: 10, labels: petstore(1) },
  },
  {
    name: 'a burst of 40 failed creates within 10 s (a lock held past SQLITE_LOCK_WAIT_MS), then none',
    alert: 'PetstoreStorageWritesFailing',
    minutes: 20,
    targets: [instance(1, [], 0, (t, s) => creates(t, s, 20, (t) => (t < 300 ? 0 : t < 310 ? (t - 300) * 4 : 40)))],
  },
  {
    name: 'a rolling restart: one instance, then the other, each missing a scrape, counters from 0',
    alert: 'PetstoreStorageWritesFailing',
    minutes: 20,
    targets: [
      instance(1, [5 * M], 20, (t, s) => creates(t, s, 20, () => 0)),
      instance(2, [7 * M], 20, (t, s) => creates(t, s, 20, () => 0)),
    ],
  },
  {
    name: 'an instance down for good from minute 2',
    alert: 'PetstoreDown',
    minutes: 12,
    targets: [{ labels: petstore(1), read: (t) => (t < 2 * M ? { petstore_ready: 1 } : undefined) }, instance(2, [], 0, () => ({}))],
    fires: { by: 7, labels: petstore(1) },
  },
  {
    name: 'a rolling restart, each instance down 25 s; and another application down in another job',
    alert: 'PetstoreDown',
    minutes: 15,
    targets: [
      instance(1, [4 * M], 25, () => ({})),
      instance(2, [6 * M], 25, () => ({})),
      { labels: { job: 'kubernetes-pods', instance: '10.0.0.9:8080', pod: 'billing-0' }, read: () => undefined },
    ],
  },
  {
    name: 'an instance that reports petstore_ready 0 from minute 1',
    alert: 'PetstoreNotReady',
    minutes: 10,
    targets: [instance(1, [], 0, (t) => ({ petstore_ready: t < M ? 1 : 0 })), instance(2, [], 0, () => ({}))],
    fires: { by: 5, labels: petstore(1) },
  },
  {
    name: 'a restart: draining (ready 0) for 1 s, down for 25 s',
    alert: 'PetstoreNotReady',
    minutes: 12,
    targets: [instance(1, [4 * M], 25, (t) => ({ petstore_ready: t >= 4 * M - 26 && t < 4 * M - 25 ? 0 : 1 }))],
  },
  {
    name: 'a process that dies and is started again every 30 s, answering scrapes in between',
    alert: 'PetstoreCrashLooping',
    minutes: 15,
    targets: [
      instance(
        1,
        Array.from({ length: 28 }, (_, i) => (i + 1) * 30),
        3,
        () => ({}),
      ),
    ],
    fires: { by: 6, labels: petstore(1) },
  },
  {
    name: 'a rolling restart and, 10 minutes later, an upgrade: each instance starts once in 15 minutes',
    alert: 'PetstoreCrashLooping',
    minutes: 30,
    targets: [instance(1, [3 * M, 14 * M], 25, () => ({})), instance(2, [4 * M, 15 * M], 25, () => ({}))],
  },
  {
    name: 'a worker that ends every 3 minutes from minute 2, its process serving throughout',
    alert: 'PetstoreWorkersRestarting',
    minutes: 16,
    targets: [instance(1, [], 0, (t) => ({ petstore_worker_restarts_total: t < 2 * M ? 0 : Math.floor((t - 2 * M) / (3 * M)) + 1 }))],
    fires: { by: 12, labels: petstore(1) },
  },
  {
    name: 'a worker that ended twice, then a rolling restart that starts the counter again',
    alert: 'PetstoreWorkersRestarting',
    minutes: 20,
    targets: [instance(1, [6 * M], 25, (t, s) => ({ petstore_worker_restarts_total: s === 0 ? (t < 2 * M ? 0 : t < 4 * M ? 1 : 2) : 0 }))],
  },
  {
    name: 'every target gone from minute 3',
    alert: 'PetstoreTargetsMissing',
    minutes: 12,
    targets: [{ labels: petstore(1), read: (t) => (t < 3 * M ? { petstore_ready: 1 } : null) }],
    fires: { by: 10, labels: { job: 'petstore' } },
  },
  {
    name: 'pods replaced one by one: the old target leaves discovery as its successor joins',
    alert: 'PetstoreTargetsMissing',
    minutes: 12,
    targets: [
      { labels: petstore(1), read: (t) => (t < 3 * M ? { petstore_ready: 1 } : null) },
      { labels: petstore(2), read: (t) => (t < 2 * M + 50 ? null : t < 6 * M ? { petstore_ready: 1 } : null) },
      { labels: petstore(3), read: (t) => (t < 5 * M + 50 ? null : { petstore_ready: 1 }) },
    ],
  },
  {
    name: '10 % of the answers 503 from minute 2',
    alert: 'PetstoreServerErrors',
    minutes: 16,
    targets: [instance(1, [], 0, (t, s) => creates(t, s, 0, (t) => (t < 2 * M ? 0 : counted(t, 2 * M, 111))))],
    fires: { by: 14, labels: { job: 'petstore' } },
  },
  {
    name: 'a single 500 on a quiet instance (2 answers a minute)',
    alert: 'PetstoreServerErrors',
    minutes: 16,
    targets: [
      instance(1, [], 0, (t, s) => ({
        'petstore_http_requests_total{operation="getPet", status="200"}': counted(t, s, 2),
        'petstore_http_requests_total{operation="getPet", status="500"}': t < 3 * M ? 0 : 1,
      })),
    ],
  },
  {
    name: 'limiting without Redis from minute 2',
    alert: 'PetstoreRateLimiterDegraded',
    minutes: 8,
    targets: [instance(1, [], 0, (t) => ({ petstore_ratelimit_degraded: t < 2 * M ? 0 : 1 }))],
    fires: { by: 6, labels: petstore(1) },
  },
  {
    name: 'a Redis restart: 50 s without it',
    alert: 'PetstoreRateLimiterDegraded',
    minutes: 10,
    targets: [instance(1, [], 0, (t) => ({ petstore_ratelimit_degraded: t >= 3 * M && t < 3 * M + 50 ? 1 : 0 }))],
  },
  {
    name: '2 % of creates take 0.5 to 1 s from minute 1',
    alert: 'PetstoreSlowRequests',
    minutes: 20,
    targets: [instance(1, [], 0, (t, s) => latencies(t, s, 0.02))],
    fires: { by: 18, labels: { job: 'petstore', operation: 'createPet' } },
  },
  {
    name: '0.5 % of creates take 0.5 to 1 s',
    alert: 'PetstoreSlowRequests',
    minutes: 20,
    targets: [instance(1, [], 0, (t, s) => latencies(t, s, 0.005))],
  },
  {
    name: 'six bans within six minutes, from minute 2',
    alert: 'PetstoreBansSpiking',
    minutes: 14,
    targets: [
      instance(1, [], 0, (t) => ({ 'petstore_bans_total{plan="free"}': Math.max(0, Math.min(6, Math.floor((t - 2 * M) / M) + 1)) })),
    ],
    fires: { by: 12, labels: { job: 'petstore' } },
  },
  {
    name: 'four bans within 15 minutes, and a rolling restart that starts the counters again',
    alert: 'PetstoreBansSpiking',
    minutes: 20,
    targets: [
      instance(1, [8 * M], 25, (t, s) => ({
        'petstore_bans_total{plan="free"}': s === 0 ? Math.min(4, Math.max(0, Math.floor((t - M) / M))) : 0,
      })),
    ],
  },
  {
    name: 'resident memory at 95 % of its limit from minute 1',
    alert: 'PetstoreMemoryNearLimit',
    minutes: 10,
    targets: [instance(1, [], 0, (t) => ({ process_resident_memory_bytes: t < M ? 1e8 : 510e6, petstore_memory_limit_bytes: 536870912 }))],
    fires: { by: 8, labels: petstore(1) },
  },
  {
    name: 'a peak above 90 % for 3 minutes',
    alert: 'PetstoreMemoryNearLimit',
    minutes: 12,
    targets: [
      instance(1, [], 0, (t) => ({
        process_resident_memory_bytes: t >= 3 * M && t < 6 * M ? 500e6 : 300e6,
        petstore_memory_limit_bytes: 536870912,
      })),
    ],
  },
  {
    name: 'an event loop 0.25 s late at the 99th percentile from minute 1',
    alert: 'PetstoreEventLoopLagging',
    minutes: 20,
    targets: [instance(1, [], 0, (t) => ({ nodejs_eventloop_lag_p99_seconds: t < M ? 0.011 : 0.25 }))],
    fires: { by: 18, labels: petstore(1) },
  },
  {
    name: 'a collection of 0.3 s for 20 s every 5 minutes',
    alert: 'PetstoreEventLoopLagging',
    minutes: 25,
    targets: [instance(1, [], 0, (t) => ({ nodejs_eventloop_lag_p99_seconds: t % 300 < 20 ? 0.3 : 0.012 }))],
  },
  {
    name: 'a certificate 10 days from its end',
    alert: 'PetstoreTlsCertificateExpiring',
    minutes: 75,
    targets: [instance(1, [], 0, () => ({ petstore_tls_certificate_expiry_timestamp_seconds: 10 * 86400 }))],
    fires: { by: 70, labels: petstore(1) },
  },
  {
    name: 'a certificate 30 days from its end',
    alert: 'PetstoreTlsCertificateExpiring',
    minutes: 75,
    targets: [instance(1, [], 0, () => ({ petstore_tls_certificate_expiry_timestamp_seconds: 30 * 86400 }))],
  },
  {
    name: 'kube-state-metrics counting 4 restarts in 8 minutes',
    alert: 'PetstoreContainerRestarting',
    minutes: 12,
    targets: [kubeRestarts((t) => Math.min(4, Math.max(0, Math.floor((t - 2 * M) / (2 * M)) + 1)))],
    fires: {
      by: 11,
      labels: { job: 'kube-state-metrics', instance: '10.0.9.9:8080', namespace: 'shop', pod: 'petstore-7d9-x2', container: 'petstore' },
    },
  },
  {
    name: 'kube-state-metrics counting the one restart of a rollout',
    alert: 'PetstoreContainerRestarting',
    minutes: 15,
    targets: [kubeRestarts((t) => (t < 3 * M ? 0 : 1))],
  },
  {
    name: 'the database file system at 30 % free, filling at 1 % of it an hour',
    alert: 'PetstoreDiskFillingUp',
    minutes: 8 * 60,
    targets: [
      instance(1, [], 0, (t) => ({
        petstore_sqlite_filesystem_size_bytes: 100e9,
        petstore_sqlite_filesystem_available_bytes: Math.round(30e9 - (t / 3600) * 1e9),
      })),
    ],
    fires: { by: 7 * 60 + 20, labels: petstore(1) },
  },
  {
    name: 'the database file system at 20 % free, steady, with a WAL that grows and is checkpointed',
    alert: 'PetstoreDiskFillingUp',
    minutes: 8 * 60,
    targets: [
      instance(1, [], 0, (t) => ({
        petstore_sqlite_filesystem_size_bytes: 100e9,
        petstore_sqlite_filesystem_available_bytes: 20e9 - ((t % 600) / 600) * 1e8,
      })),
    ],
  },
];

/** The samples of every series of a case, scraped every `interval` s from `offset` s; promtool's values strings at `step` s. */
function sampled(c: Case, interval: number, offset: number, step: number): { series: string; values: string }[] {
  const steps = Math.floor((c.minutes * M) / step);
  const rows = new Map<string, string[]>();
  const row = (series: string) => {
    if (!rows.has(series))
      rows.set(
        series,
        Array.from({ length: steps + 1 }, () => '_'),
      );
    return rows.get(series)!;
  };
  for (const target of c.targets) {
    const own = Object.entries(target.labels).map(([k, v]) => `${k}="${v}"`);
    const withLabels = (name: string) => {
      const [, metric, labels] = /^(\w+)(?:\{(.*)\})?$/.exec(name)!;
      return `${metric}{${[...own, ...(labels ? [labels] : [])].join(', ')}}`;
    };
    const seen = new Set<string>();
    for (let t = offset; t <= c.minutes * M; t += interval) {
      const j = Math.round(t / step);
      const reading = target.read(t);
      // A failed scrape records up 0 and marks the target's series stale; a target gone marks all stale.
      if (reading === null) {
        if (seen.has(withLabels('up'))) for (const name of seen) row(name)[j] = 'stale';
        seen.clear();
        continue;
      }
      seen.add(withLabels('up'));
      row(withLabels('up'))[j] = reading ? '1' : '0';
      if (!reading) {
        for (const name of seen) if (name !== withLabels('up')) row(name)[j] = 'stale';
      } else
        for (const [name, value] of Object.entries(reading)) {
          const full = withLabels(name);
          seen.add(full);
          row(full)[j] = String(value);
        }
    }
  }
  // Prometheus scrapes itself throughout: the store has samples up to the end whatever the targets do.
  const own = { series: 'prometheus_ready{job="prometheus", instance="localhost:9090"}', values: `1x${steps}` };
  return [own, ...[...rows].map(([series, values]) => ({ series, values: values.join(' ') }))];
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

test(
  "each rule fires by its minute, or stays quiet, at scrape intervals of 15 s, 30 s and 1 minute off the evaluations' beat",
  { skip: prometheusMissing('the alert rules at three scrape intervals') },
  (t) => {
    const dir = tempDir(t);
    const shipped = parse(readFileSync(RULES, 'utf8')) as {
      groups: { rules: { alert: string; annotations?: unknown; labels?: Record<string, string> }[] }[];
    };
    const rules = shipped.groups.flatMap((g) => g.rules);
    for (const rule of rules) delete rule.annotations;
    writeFileSync(join(dir, 'rules.yml'), stringify(shipped));
    const severity = (alert: string) => rules.find((r) => r.alert === alert)!.labels!.severity!;

    let cases = 0;
    for (const evaluation of [15, 60]) {
      const tests: unknown[] = [];
      for (const interval of [15, 30, 60]) {
        // Two offsets off the evaluations' beat, one early in the interval and one late; multiples of 5 s, so
        // a case's samples fall on a 5-second grid (a 1-second one would make the hours-long cases five times longer).
        for (const offset of [5 * Math.round(interval / 15), interval - 5]) {
          // The cases of hours run at Prometheus's default evaluation, every minute, only: at every 15 s they
          // would take most of this file's time for the same answer.
          for (const c of CASES.filter((x) => x.minutes <= 120 || evaluation === 60)) {
            const step = gcd(gcd(interval, offset), evaluation);
            const checks = [];
            const last = c.minutes;
            if (c.fires) {
              const firing = [{ exp_labels: { ...c.fires.labels, alertname: c.alert, severity: severity(c.alert) } }];
              checks.push({ eval_time: `${c.fires.by}m`, alertname: c.alert, exp_alerts: firing });
              checks.push({ eval_time: `${last}m`, alertname: c.alert, exp_alerts: firing });
            } else {
              // Quiet at every evaluation of the first half hour (promtool reports what fires at each
              // eval_time), then every 10 minutes of a longer case.
              for (let s = evaluation; s <= last * M; s += s < 30 * M ? evaluation : 10 * M)
                checks.push({ eval_time: `${s}s`, alertname: c.alert, exp_alerts: [] });
            }
            tests.push({
              name: `${c.alert}: ${c.name} (scrapes every ${interval} s from ${offset} s, rules every ${evaluation} s)`,
              interval: `${step}s`,
              input_series: sampled(c, interval, offset, step),
              alert_rule_test: checks,
            });
          }
        }
      }
      const file = join(dir, `timing-${evaluation}s.test.yml`);
      writeFileSync(
        file,
        stringify(
          { rule_files: ['rules.yml'], evaluation_interval: `${evaluation}s`, tests },
          { lineWidth: 0, aliasDuplicateObjects: false },
        ),
      );
      const run = spawnSync(PROMTOOL, ['test', 'rules', file], { encoding: 'utf8', maxBuffer: 256 << 20 });
      const output = `${run.stdout}${run.stderr}`;
      assert.equal(run.status, 0, `promtool test rules, rules every ${evaluation} s:\n${output.slice(0, 6000)}`);
      cases += tests.length;
    }
    t.diagnostic(
      `${cases} timing cases (${CASES.length} cases × 3 intervals × 2 offsets × 2 evaluation intervals, those of hours at one) passed`,
    );

    // Every alert of the rules fires in one case here and stays quiet in another, but the two whose
    // conditions take a day or most of one to build up (alerts-daily.test.yml has them, at a 2-minute
    // scrape): a gauge against the clock, and the same prediction as PetstoreDiskFillingUp's over an
    // hour, whose scrape-interval behaviour that one's cases show.
    const daily = ['PetstoreBackupStale', 'PetstoreDiskAlmostFull'];
    assert.deepEqual(
      rules.map((r) => r.alert).filter((a) => !daily.includes(a) && !CASES.some((c) => c.alert === a)),
      [],
      'every alert has timing cases',
    );
    for (const alert of new Set(CASES.map((c) => c.alert))) {
      assert.ok(
        CASES.some((c) => c.alert === alert && c.fires),
        `${alert} fires in a timing case`,
      );
      assert.ok(
        CASES.some((c) => c.alert === alert && !c.fires),
        `${alert} stays quiet in a timing case`,
      );
    }
  },
);

test(
  "a copy for a shared job (npm run alerts -- --selector ... --runbook-base URL) reads the service's targets only, keeping namespace and pod",
  { skip: prometheusMissing('the rules for another selector') },
  (t) => {
    const dir = tempDir(t);
    const selector = 'job="kubernetes-pods", app_kubernetes_io_name="petstore"';
    const base = 'https://git.example.com/shop/petstore/blob/v1.4.0';
    const copy = alertRules(readFileSync(RULES, 'utf8'), { selector, runbookBase: `${base}/` });
    const parsed = parse(copy) as { groups: { rules: { alert: string; expr: string; annotations?: Record<string, string> }[] }[] };
    const shipped = parse(readFileSync(RULES, 'utf8')) as typeof parsed;
    const shippedRunbook = (alert: string) =>
      shipped.groups.flatMap((g) => g.rules).find((r) => r.alert === alert)!.annotations!.runbook_url;
    for (const rule of parsed.groups.flatMap((g) => g.rules)) {
      assert.equal(rule.annotations!.runbook_url, `${base}/${shippedRunbook(rule.alert)}`);
      if (rule.alert !== 'PetstoreContainerRestarting')
        assert.ok(rule.expr.includes(selector), `${rule.alert} reads ${selector}: ${rule.expr}`);
      assert.ok(!rule.expr.includes('job="petstore"'), `${rule.alert}: ${rule.expr}`);
      delete rule.annotations;
    }
    writeFileSync(join(dir, 'rules.yml'), stringify(parsed));
    // One job of every annotated pod: two petstore pods in two namespaces, a billing pod down all along.
    const pod = (namespace: string, name: string, app: string) => ({
      job: 'kubernetes-pods',
      namespace,
      pod: name,
      instance: `${name}:9464`,
      app_kubernetes_io_name: app,
    });
    const labels = (l: Record<string, string>) =>
      `{${Object.entries(l)
        .map(([k, v]) => `${k}="${v}"`)
        .join(', ')}}`;
    const billing = pod('shop', 'billing-0', 'billing');
    const staging = pod('staging', 'petstore-a', 'petstore');
    const production = pod('production', 'petstore-b', 'petstore');
    const tests = [
      {
        name: 'a billing pod down, the petstore pods up: quiet; then the production petstore pod down: fires for it alone',
        interval: '1m',
        input_series: [
          { series: `up${labels(billing)}`, values: '0x15' },
          { series: `up${labels(staging)}`, values: '1x15' },
          { series: `up${labels(production)}`, values: '1x5 0x10' },
        ],
        alert_rule_test: [
          { eval_time: '4m', alertname: 'PetstoreDown', exp_alerts: [] },
          {
            eval_time: '12m',
            alertname: 'PetstoreDown',
            exp_alerts: [{ exp_labels: { ...production, alertname: 'PetstoreDown', severity: 'critical' } }],
          },
        ],
      },
      {
        name: 'staging failing every create, production healthy: one alert, for staging',
        interval: '1m',
        input_series: [
          { series: `petstore_http_requests_total${labels({ ...staging, operation: 'createPet', status: '503' })}`, values: '0+10x20' },
          { series: `petstore_http_requests_total${labels({ ...staging, operation: 'createPet', status: '201' })}`, values: '0+10x20' },
          { series: `petstore_http_requests_total${labels({ ...production, operation: 'createPet', status: '503' })}`, values: '0x20' },
          { series: `petstore_http_requests_total${labels({ ...production, operation: 'createPet', status: '201' })}`, values: '0+100x20' },
        ],
        alert_rule_test: [
          {
            eval_time: '15m',
            alertname: 'PetstoreServerErrors',
            exp_alerts: [
              { exp_labels: { job: 'kubernetes-pods', namespace: 'staging', alertname: 'PetstoreServerErrors', severity: 'critical' } },
            ],
          },
          {
            eval_time: '15m',
            alertname: 'PetstoreStorageWritesFailing',
            exp_alerts: [
              {
                exp_labels: {
                  job: 'kubernetes-pods',
                  namespace: 'staging',
                  instance: staging.instance,
                  pod: staging.pod,
                  alertname: 'PetstoreStorageWritesFailing',
                  severity: 'critical',
                },
              },
            ],
          },
        ],
      },
    ];
    const file = join(dir, 'shared-job.test.yml');
    writeFileSync(file, stringify({ rule_files: ['rules.yml'], evaluation_interval: '1m', tests }, { aliasDuplicateObjects: false }));
    const run = spawnSync(PROMTOOL, ['test', 'rules', file], { encoding: 'utf8' });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);

    assert.throws(() => alertRules('', { selector: 'job=petstore' }), /--selector takes label matchers/);
    assert.throws(() => alertRules('', { runbookBase: 'docs/' }), /--runbook-base takes an absolute URL/);
  },
);
