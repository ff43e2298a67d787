/**
 * Spans for SQLite, which has no instrumentation: each Store call made for a request becomes a client span
 * `sqlite <method>` under the request's span (pg is instrumented already, one span per query).
 */
import { context, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import type { Store } from '../storage/store.ts';

/** The store with every call in a span; what is not a method (engine, fullPagesAreFinal) is copied. */
export function withSqliteSpans(store: Store, tracer: Tracer): Store {
  const traced: Record<string, unknown> = { ...store };
  for (const [name, value] of Object.entries(store)) {
    // Pool figures are read synchronously by the metrics, and SQLite keeps no pool anyway.
    if (typeof value !== 'function' || name === 'poolStats') continue;
    traced[name] = inSpan(tracer, name, value as (...args: unknown[]) => Promise<unknown>, store);
  }
  return traced as unknown as Store;
}

function inSpan(tracer: Tracer, method: string, call: (...args: unknown[]) => Promise<unknown>, store: Store) {
  const name = `sqlite ${method}`;
  const options = { kind: SpanKind.CLIENT, attributes: { 'db.system': 'sqlite', 'db.system.name': 'sqlite', 'db.operation.name': method } };
  return (...args: unknown[]) => {
    // Like the PostgreSQL and Redis spans, only work done for a request is traced: not the start,
    // the shutdown or background work.
    if (trace.getSpan(context.active()) === undefined) return call.apply(store, args);
    return tracer.startActiveSpan(name, options, async (span: Span) => {
      try {
        return await call.apply(store, args);
      } catch (err) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
        throw err;
      } finally {
        span.end();
      }
    });
  };
}
