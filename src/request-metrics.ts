/**
 * `petstore_http_requests_total{operation,status}` and `petstore_http_request_duration_seconds{operation}`,
 * tallied in plain numbers and turned into prom-client's exposition only when /metrics is read: its label
 * handling on every request cost far more (docs/operations.md, "Metrics").
 */
import { Counter, Histogram, type Registry } from 'prom-client';

const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5] as const;
const DURATION_NAME = 'petstore_http_request_duration_seconds';
const DURATION_HELP = 'Time from receiving a request to finishing its answer, by operation.';

interface OperationTally {
  /** Answers by status code. */
  statuses: Map<number, number>;
  /** Timed answers per bucket: index i counts durations in (bound i-1, bound i]; the last, those above every bound. */
  buckets: number[];
  sum: number;
  count: number;
}

/** The server errors each of the API's operations is counted at 0 for from the start, so that the first of each is an increase. */
const STARTED_AT_ZERO = [500, 503];

export class RequestTally {
  readonly #operations = new Map<string, OperationTally>();
  /** The operations whose series exist from the start. */
  readonly #fromStart: ReadonlySet<string>;

  /** `operations`: those whose 500 and 503 series exist from the start, at 0 (with their duration histogram). */
  constructor(operations: readonly string[] = []) {
    this.#fromStart = new Set(operations);
    for (const operation of operations) {
      const tally = this.#tallyOf(operation);
      for (const status of STARTED_AT_ZERO) tally.statuses.set(status, 0);
    }
  }

  #tallyOf(operation: string): OperationTally {
    let tally = this.#operations.get(operation);
    if (tally === undefined) {
      tally = { statuses: new Map(), buckets: new Array<number>(DURATION_BUCKETS.length + 1).fill(0), sum: 0, count: 0 };
      this.#operations.set(operation, tally);
    }
    return tally;
  }

  /** One answer; `seconds` when it was timed (answers written outside the router are counted only). */
  record(operation: string, status: number, seconds?: number): void {
    const tally = this.#tallyOf(operation);
    tally.statuses.set(status, (tally.statuses.get(status) ?? 0) + 1);
    if (seconds === undefined) return;
    let i = 0;
    while (i < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[i]!) i++;
    tally.buckets[i]!++;
    tally.sum += seconds;
    tally.count++;
  }

  /** Writes the counts so far into the request counter, which is rebuilt from them on every read. */
  writeRequests(counter: Counter<'operation' | 'status'>): void {
    counter.reset();
    for (const [operation, tally] of this.#operations) {
      for (const [status, count] of tally.statuses) counter.inc({ operation, status }, count);
    }
  }

  /** The duration histogram's series, in the form prom-client's registry writes (cumulative buckets, then sum and count). */
  durationValues(name: string): { labels: Record<string, string | number>; value: number; metricName: string }[] {
    const values = [];
    for (const [operation, tally] of this.#operations) {
      if (tally.count === 0 && !this.#fromStart.has(operation)) continue; // counted, never timed
      let cumulative = 0;
      for (const [i, bound] of DURATION_BUCKETS.entries()) {
        cumulative += tally.buckets[i]!;
        values.push({ labels: { le: bound, operation }, value: cumulative, metricName: `${name}_bucket` });
      }
      values.push({ labels: { le: '+Inf', operation }, value: tally.count, metricName: `${name}_bucket` });
      values.push({ labels: { operation }, value: tally.sum, metricName: `${name}_sum` });
      values.push({ labels: { operation }, value: tally.count, metricName: `${name}_count` });
    }
    return values;
  }
}

type HistogramData = Awaited<ReturnType<Histogram<'operation'>['get']>>;

/** A histogram whose series are read from the tally when the registry is read; nothing observes it directly. */
class TalliedHistogram extends Histogram<'operation'> {
  readonly #tally: RequestTally;

  constructor(tally: RequestTally, registry: Registry) {
    super({
      name: DURATION_NAME,
      help: DURATION_HELP,
      labelNames: ['operation'],
      buckets: [...DURATION_BUCKETS],
      registers: [registry],
    });
    this.#tally = tally;
  }

  // Typed as the base class's: its label type leaves out `le`, which every histogram's buckets carry.
  override async get(): Promise<HistogramData> {
    const values = this.#tally.durationValues(DURATION_NAME);
    return {
      name: DURATION_NAME,
      help: DURATION_HELP,
      type: 'histogram',
      aggregator: 'sum',
      collect: () => {},
      values,
    } as unknown as HistogramData;
  }

  /** What the registry reads for the text exposition: the same series. */
  async getForPromString() {
    return this.get();
  }
}

/** Registers both request metrics on the registry; requests are then counted through the tally. */
export function requestMetrics(registry: Registry, operations: readonly string[] = []): RequestTally {
  const tally = new RequestTally(operations);
  new Counter({
    name: 'petstore_http_requests_total',
    help: 'Answered requests by operation (operationId, or the route for probes; "unmatched" when no route matched) and status.',
    labelNames: ['operation', 'status'] as const,
    registers: [registry],
    collect() {
      tally.writeRequests(this);
    },
  });
  new TalliedHistogram(tally, registry);
  return tally;
}
