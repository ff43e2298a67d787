/**
 * The Node server under Fastify: plain HTTP, or HTTPS when a certificate and key are configured
 * (TLS_CERT, TLS_KEY), with the same timeouts either way. Most deployments terminate TLS at a proxy
 * in front (see the README); the built-in listener is for running without one.
 */
import http from 'node:http';
import https from 'node:https';

export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
}

export interface NodeServerOptions {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  tls?: TlsFiles;
}

export function createNodeServer(handler: http.RequestListener, options: NodeServerOptions): http.Server {
  const shared: http.ServerOptions = {
    headersTimeout: options.headersTimeoutMs,
    requestTimeout: options.requestTimeoutMs,
    keepAliveTimeout: options.keepAliveTimeoutMs,
    // Node checks both timeouts on this period (30 s by default), so a tenth keeps the overshoot small.
    connectionsCheckingInterval: Math.max(50, Math.min(options.headersTimeoutMs, options.requestTimeoutMs) / 10),
  };
  // An HTTPS server has the same request API as an HTTP one; Fastify drives both alike.
  const server = options.tls
    ? (https.createServer({ ...shared, cert: options.tls.cert, key: options.tls.key }, handler) as unknown as http.Server)
    : http.createServer(shared, handler);
  server.keepAliveTimeout = options.keepAliveTimeoutMs;
  server.requestTimeout = options.requestTimeoutMs;
  return server;
}
