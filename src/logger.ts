/** The service's structured JSON log (pino). */
import type { FastifyBaseLogger } from 'fastify';
import { pino, type DestinationStream } from 'pino';
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
