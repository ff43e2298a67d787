/**
 * TLS_CERT and TLS_KEY read again on SIGHUP (a renewed certificate: certbot's deploy hook, a mounted Secret
 * updated, `systemctl reload petstore`), without a restart: connections made from then on get the new pair,
 * open ones keep theirs. A pair that cannot be read, or whose key is not the certificate's, keeps the one in
 * use, and the log says why (docs/operations.md, "TLS").
 */
import type { FastifyBaseLogger } from 'fastify';
import { X509Certificate } from 'node:crypto';
import type { Server } from 'node:https';
import { createSecureContext } from 'node:tls';
import { readTls } from '../../config/named-files.ts';
import type { Config } from '../../config.ts';

/** When the certificate at the start of a PEM bundle stops being valid, as its notAfter says. */
function certificateEnd(cert: Buffer): string {
  return new Date(new X509Certificate(cert).validTo).toISOString();
}

/** Reads the pair again and puts it in use, saying so in the log either way. */
function reloadTls(server: Server, config: Pick<Config, 'tls'>, log: FastifyBaseLogger): void {
  let files: { cert: Buffer; key: Buffer };
  try {
    files = readTls(config)!;
    createSecureContext(files); // refuses a key that is not the certificate's, before anything changes
  } catch (err) {
    log.error({ err: { message: (err as Error).message } }, 'TLS certificate not reloaded: the one in use is kept');
    return;
  }
  server.setSecureContext(files);
  log.info({ certificateValidUntil: certificateEnd(files.cert) }, 'TLS certificate reloaded');
}

/** On each SIGHUP, the pair is read again (reloadTls); nothing for plain HTTP. */
export function reloadTlsOnSignal(server: Server, config: Pick<Config, 'tls'>, log: FastifyBaseLogger): void {
  if (!config.tls) return;
  process.on('SIGHUP', () => reloadTls(server, config, log));
}
