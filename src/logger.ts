/** The service's structured JSON log (pino). */
import type { FastifyBaseLogger } from 'fastify';
import type { FastifyChildLoggerFactory } from 'fastify/types/logger.js';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config } from './config.ts';

/**
 * Fields added to every line, read when the line is written: with tracing on, the trace id of the
 * request the line is about (tracing/start.ts). It must return a new object each time: pino merges
 * the line's own fields into it.
 */
export type LineFields = () => Record<string, string>;

export function createLogger(level: Config['logLevel'], stream?: DestinationStream, fields?: LineFields): FastifyBaseLogger {
  return pino(
    {
      level,
      // Keys and cookies must never reach a log line, whatever a future serializer prints.
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie'],
        censor: '[redacted]',
      },
      // Without tracing there is no mixin at all, so a line costs what it did before.
      ...(fields && { mixin: fields }),
    },
    stream,
  );
}

/**
 * A request's child logger, made on the first line the request writes (or when its level is set): below info
 * most requests write none. Its lines are the eager child's; nothing else is made per request.
 */
class RequestLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Record<string, unknown>;
  #child: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger, bindings: Record<string, unknown>) {
    this.#parent = parent;
    this.#bindings = bindings;
  }

  get #logger(): FastifyBaseLogger {
    return (this.#child ??= this.#parent.child(this.#bindings));
  }

  /** The logger for a line at `level`: none while no child was made and the line would be dropped anyway. */
  #at(level: string): FastifyBaseLogger | undefined {
    if (this.#child === undefined && (this.#parent as Partial<Logger>).isLevelEnabled?.(level) === false) return undefined;
    return this.#logger;
  }

  get level(): string {
    return (this.#child ?? this.#parent).level;
  }

  set level(level: string) {
    this.#logger.level = level;
  }

  fatal(...args: LogArgs): void {
    this.#at('fatal')?.fatal(...args);
  }
  error(...args: LogArgs): void {
    this.#at('error')?.error(...args);
  }
  warn(...args: LogArgs): void {
    this.#at('warn')?.warn(...args);
  }
  info(...args: LogArgs): void {
    this.#at('info')?.info(...args);
  }
  debug(...args: LogArgs): void {
    this.#at('debug')?.debug(...args);
  }
  trace(...args: LogArgs): void {
    this.#at('trace')?.trace(...args);
  }
  silent(): void {}

  child(...args: Parameters<FastifyBaseLogger['child']>): FastifyBaseLogger {
    return this.#logger.child(...args);
  }
}

type LogArgs = [obj: unknown, msg?: string, ...args: unknown[]];

/**
 * Fastify's childLoggerFactory: a request's logger, made lazily. A route's own log level or
 * serializers need the real child at once.
 */
export const requestLogger: FastifyChildLoggerFactory = (parent, bindings, options) =>
  options.level !== undefined || options.serializers !== undefined
    ? parent.child(bindings, options)
    : (new RequestLogger(parent, bindings) as unknown as FastifyBaseLogger);
