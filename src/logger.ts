/** The service's structured JSON log (pino). */
import type { FastifyBaseLogger } from 'fastify';
import { pino, type DestinationStream } from 'pino';
import type { Config } from './config.ts';

export function createLogger(level: Config['logLevel'], stream?: DestinationStream): FastifyBaseLogger {
  return pino(
    {
      level,
      // Keys and cookies must never reach a log line, whatever a future serializer prints.
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie'],
        censor: '[redacted]',
      },
    },
    stream,
  );
}
