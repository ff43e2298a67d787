/**
 * TLS_CERT and TLS_KEY read again on SIGHUP (a renewed certificate: certbot's deploy hook, a mounted Secret
 * updated, `systemctl reload petstore`), without a restart: connections made from then on get the new pair,
 * open ones keep theirs. A pair that cannot be read, or whose key is not the certificate's, keeps the one in
 * use, and the log says why (docs/operations.md, "TLS").
 */
import type { FastifyBaseLogger } from 'fastify';
import { processSignals, type SignalSource } from '../../workers/signals.ts';
import { X509Certificate } from 'node:crypto';
import type { Server } from 'node:https';
import { createSecureContext } from 'node:tls';
import { readTls } from '../../config/named-files.ts';
import type { Config } from '../../config.ts';

/** When the certificate at the start of a PEM bundle stops being valid, as its notAfter says. */
export function certificateEnd(cert: Buffer): Date {
  return new Date(new X509Certificate(cert).validTo);
}

/** Reads the pair again and puts it in use, saying so in the log either way. */
function reloadTls(server: Server, config: Pick<Config, 'tls'>, log: FastifyBaseLogger, inUse: (validTo: Date) => void): void {
  let files: { cert: Buffer; key: Buffer };
  let validTo: Date;
  try {
    files = readTls(config)!;
    createSecureContext(files); // refuses a key that is not the certificate's, before anything changes
    validTo = certificateEnd(files.cert);
  } catch (err) {
    log.error({ err: { message: (err as Error).message } }, 'TLS certificate not reloaded: the one in use is kept');
    return;
  }
  server.setSecureContext(files);
  inUse(validTo);
  log.info({ certificateValidUntil: validTo.toISOString() }, 'TLS certificate reloaded');
}

/**
 * On each SIGHUP, the pair is read again (reloadTls); for a server with TLS only. `inUse` hears when each
 * certificate put in use expires, the first at once (petstore_tls_certificate_expiry_timestamp_seconds).
 */
export function reloadTlsOnSignal(
  server: Server,
  config: Pick<Config, 'tls'>,
  log: FastifyBaseLogger,
  { certificate, inUse }: { certificate: Buffer; inUse: (validTo: Date) => void },
  signals: SignalSource = processSignals,
): void {
  inUse(certificateEnd(certificate));
  signals.on('SIGHUP', () => reloadTls(server, config, log, inUse));
}
