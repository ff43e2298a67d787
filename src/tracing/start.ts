/**
 * OpenTelemetry tracing, loaded by the CLI only when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/operations.md,
 * "Tracing"). Spans leave in batches in the background: a slow or absent collector costs spans, never requests.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { FastifyOtelInstrumentation } from '@fastify/otel';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { LineFields } from '../logger.ts';
import type { Store } from '../storage/store.ts';
import { packageVersion } from '../version.ts';
import { interceptImports } from './imports.ts';
import { withSqliteSpans } from './sqlite-spans.ts';

/** What the server needs of tracing; the server imports this type only, never the module. */
export interface Tracing {
  /** For every log line: the trace id of the request it is about. */
  logFields: LineFields;
  /** The SQLite store, with a span around each call. */
  traceSqlite(store: Store): Store;
  /** Sends the spans still queued, giving up after withinMs, and stops. */
  shutdown(withinMs: number): Promise<void>;
}

/** The packages whose imports the instrumentations patch (pg-pool: pg's pool, imported by pg). */
const INSTRUMENTED_PACKAGES = ['pg', 'pg-pool', 'ioredis'];

/** `attributes`: more of the resource, as a worker's number (docs/workers.md). */
export function startTracing(
  config: Pick<Config, 'otlpEndpoint' | 'otelServiceName'>,
  attributes: Record<string, string | number> = {},
): Tracing {
  interceptImports(INSTRUMENTED_PACKAGES);

  // OTEL_SERVICE_NAME is read by the configuration (default petstore); OTEL_RESOURCE_ATTRIBUTES
  // adds to it, as the standard says.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': config.otelServiceName, 'service.version': packageVersion(), ...attributes }))
    .merge(detectResources({ detectors: [envDetector] }));
  // The exporter reads OTEL_EXPORTER_OTLP_ENDPOINT (adding /v1/traces) and the other
  // OTEL_EXPORTER_OTLP_* variables (headers, timeout) itself, and sends JSON.
  const processor = new BatchSpanProcessor({ exporter: new OTLPTraceExporter() });
  const provider = new TracerProvider({ resource, spanProcessors: [processor] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);

  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      // Joins every Fastify instance as it is created (a diagnostics channel), so the app needs no
      // change. One span per request, named by its route: a span for each of the dozen hooks, or for
      // the handler, would cost more than the rest of the trace and tell little the storage spans
      // under the request's do not.
      new FastifyOtelInstrumentation({
        registerOnInitialization: true,
        instrumentHooks: false,
        instrumentHandler: false,
        requestHook: (span, request: FastifyRequest) => span.updateName(`${request.method} ${request.routeOptions.url ?? 'unmatched'}`),
      }),
      // Only work done inside a request's trace: not the start-up's migrations or the limiter's
      // health checks. Queries are recorded as written, without their values (the default); Redis
      // commands by name only, since their arguments name keys and client addresses.
      new PgInstrumentation({ requireParentSpan: true }),
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    ],
  });

  const tracer = provider.getTracer('petstore', packageVersion());
  return {
    logFields(): Record<string, string> {
      const span = trace.getSpan(context.active());
      return span ? { traceId: span.spanContext().traceId } : {};
    },
    traceSqlite: (store) => withSqliteSpans(store, tracer),
    async shutdown(withinMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs)));
      try {
        await Promise.race([provider.shutdown().catch(() => undefined), late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
