/**
 * One /metrics for a process of several workers (docs/workers.md). Each worker keeps its own registry; the
 * supervisor asks every worker for its metrics as JSON and adds them up (prom-client's aggregation: counters
 * summed, each gauge by its own rule), with its own registry beside them. The `process_*` series describe the
 * whole process in every thread, so they are taken from the supervisor's registry alone; the `nodejs_*` ones
 * are each thread's (its heap, its event loop), summed or averaged as prom-client says.
 */
import { randomUUID } from 'node:crypto';
import type { MessagePort, Worker } from 'node:worker_threads';
import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

/** One metric as a registry gives it in JSON (getMetricsAsJSON). */
type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number];

/** How long the supervisor waits for a worker's metrics: one that does not answer is left out of the scrape. */
const WORKER_ANSWER_MS = 2000;

interface MetricsRequest {
  type: 'metrics-json';
  id: string;
}
interface MetricsAnswer {
  type: 'metrics-json';
  id: string;
  /** As JSON text: a metric's object may hold functions, which a message cannot carry. */
  metrics: string;
}
/** A worker's request for the whole process's exposition (the token route on the API port). */
interface ExpositionRequest {
  type: 'exposition';
  id: string;
}
interface ExpositionAnswer {
  type: 'exposition';
  id: string;
  text: string;
}

/** What serves /metrics: the exposition's content type and text. */
export interface Exposition {
  contentType: string;
  text(): Promise<string>;
}

/** A registry's own exposition (one server, or one worker's part). */
export function registryExposition(registry: Registry): Exposition {
  return { contentType: registry.contentType, text: () => registry.metrics() };
}

/** In a worker: answers the supervisor's requests for its metrics. */
export function answerMetricsRequests(port: MessagePort, registry: Registry): void {
  port.on('message', (message: Partial<MetricsRequest>) => {
    const id = message.id;
    if (message.type !== 'metrics-json' || !id) return;
    void registry
      .getMetricsAsJSON()
      .then((metrics) => port.postMessage({ type: 'metrics-json', id, metrics: JSON.stringify(metrics) } satisfies MetricsAnswer));
  });
}

/** In a worker: the process's exposition, asked of the supervisor. */
export function supervisorExposition(port: MessagePort): Exposition {
  const waiting = new Map<string, (text: string) => void>();
  port.on('message', (message: Partial<ExpositionAnswer>) => {
    if (message.type === 'exposition' && message.id) waiting.get(message.id)?.(message.text ?? '');
  });
  return {
    contentType: Registry.PROMETHEUS_CONTENT_TYPE,
    text: () =>
      new Promise<string>((resolve, reject) => {
        const id = randomUUID();
        const timer = setTimeout(() => {
          waiting.delete(id);
          reject(new Error('the supervisor did not answer for the metrics'));
        }, 2 * WORKER_ANSWER_MS);
        waiting.set(id, (text) => {
          clearTimeout(timer);
          waiting.delete(id);
          resolve(text);
        });
        port.postMessage({ type: 'exposition', id } satisfies ExpositionRequest);
      }),
  };
}

/**
 * How many workers the process runs and serve, and how many were started again: in the supervisor's registry, or
 * in one server's (WORKERS=1: one serving, none started again), so the rules and the dashboard read them alike.
 */
export function workerMetrics(registry: Registry, configured: number): { serving: Gauge; restarts: Counter } {
  const serving = new Gauge({ name: 'petstore_workers_serving', help: 'Workers of this process serving now.', registers: [registry] });
  new Gauge({ name: 'petstore_workers_configured', help: 'Workers this process runs (WORKERS).', registers: [registry] }).set(configured);
  const restarts = new Counter({
    name: 'petstore_worker_restarts_total',
    help: 'Workers started again after one ended unasked (an uncaught error, its heap limit).',
    registers: [registry],
  });
  restarts.inc(0);
  return { serving, restarts };
}

/** The supervisor's side: its own registry, and the process's exposition made of every worker's. */
export class ProcessMetrics implements Exposition {
  readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;
  readonly registry = new Registry();
  readonly workersServing: Gauge;
  readonly workerRestarts: Counter;
  readonly #workers: () => Iterable<Worker>;

  constructor(workers: () => Iterable<Worker>, configured: number) {
    this.#workers = workers;
    collectDefaultMetrics({ register: this.registry });
    ({ serving: this.workersServing, restarts: this.workerRestarts } = workerMetrics(this.registry, configured));
  }

  /** Answers a worker's request for the process's exposition (the token route). */
  serve(worker: Worker): void {
    worker.on('message', (message: Partial<ExpositionRequest>) => {
      const id = message.id;
      if (message.type !== 'exposition' || !id) return;
      void this.text().then(
        (text) => worker.postMessage({ type: 'exposition', id, text } satisfies ExpositionAnswer),
        () => undefined,
      );
    });
  }

  async text(): Promise<string> {
    const parts = await Promise.all([...this.#workers()].map((worker) => this.#askWorker(worker)));
    const ours = await this.registry.getMetricsAsJSON();
    const theirs = parts
      .filter((p): p is MetricJson[] => p !== undefined)
      .map((metrics) => metrics.filter((m) => !m.name.startsWith('process_')));
    return AggregatorRegistry.aggregate([ours, ...theirs]).metrics();
  }

  #askWorker(worker: Worker): Promise<MetricJson[] | undefined> {
    return new Promise((resolve) => {
      const id = randomUUID();
      const timer = setTimeout(() => done(undefined), WORKER_ANSWER_MS);
      const listener = (message: Partial<MetricsAnswer>) => {
        if (message.type === 'metrics-json' && message.id === id) done(JSON.parse(message.metrics ?? '[]') as MetricJson[]);
      };
      const done = (metrics: MetricJson[] | undefined) => {
        clearTimeout(timer);
        worker.off('message', listener);
        resolve(metrics);
      };
      worker.on('message', listener);
      worker.postMessage({ type: 'metrics-json', id } satisfies MetricsRequest);
    });
  }
}
