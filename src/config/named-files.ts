import { readFileSync } from 'node:fs';
import type { Config } from '../config.ts';
import { ConfigError } from './variable.ts';

/** A file a variable names, read at start: a missing or unreadable one stops the server with one clear line. */
export function readNamedFile(variable: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(`${variable} cannot be read: ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** TLS_CERT and TLS_KEY, read; undefined for plain HTTP. */
export function readTls(config: Pick<Config, 'tls'>): { cert: Buffer; key: Buffer } | undefined {
  if (!config.tls) return undefined;
  return { cert: readNamedFile('TLS_CERT', config.tls.certPath), key: readNamedFile('TLS_KEY', config.tls.keyPath) };
}
