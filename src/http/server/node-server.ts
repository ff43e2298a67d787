/**
 * The Node server under Fastify: plain HTTP, or HTTPS when a certificate and key are configured
 * (TLS_CERT, TLS_KEY), with the same timeouts either way. Most deployments terminate TLS at a proxy
 * in front (see the README); the built-in listener is for running without one.
 */
import type { IncomingMessage, RequestListener, Server, ServerOptions } from 'node:http';
import https from 'node:https';
import { nodeHttp } from './node-http.ts';

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

/** `http://host:port` at the start of an absolute-form request target. */
const SCHEME_AND_AUTHORITY = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * HTTP/1.1 servers must accept a request target in absolute form (`GET http://host/v1/pets`). It is
 * turned into the origin form (`/v1/pets`) before anything reads it, so that every check made on the
 * path (authentication and rate limits under /v1, cache headers) sees what the router sees.
 */
function toOriginForm(request: IncomingMessage): void {
  const url = request.url!;
  if (url.charCodeAt(0) === 0x2f /* / */) return;
  const authority = SCHEME_AND_AUTHORITY.exec(url);
  if (!authority) return; // `*` (OPTIONS) or garbage: no route matches it
  const rest = url.slice(authority[0].length);
  request.url = rest.startsWith('/') ? rest : `/${rest}`;
}

export function createNodeServer(routeRequest: RequestListener, options: NodeServerOptions): Server {
  const handler: RequestListener = (request, response) => {
    toOriginForm(request);
    routeRequest(request, response);
  };
  const shared: ServerOptions = {
    headersTimeout: options.headersTimeoutMs,
    requestTimeout: options.requestTimeoutMs,
    keepAliveTimeout: options.keepAliveTimeoutMs,
    // Node checks both timeouts on this period (30 s by default), so a tenth keeps the overshoot small.
    connectionsCheckingInterval: Math.max(50, Math.min(options.headersTimeoutMs, options.requestTimeoutMs) / 10),
    // Node's own answer to a request without Host is a bare 400 that no hook sees; app.ts answers it.
    requireHostHeader: false,
  };
  // An HTTPS server has the same request API as an HTTP one; Fastify drives both alike.
  const server = options.tls
    ? (https.createServer({ ...shared, cert: options.tls.cert, key: options.tls.key }, handler) as unknown as Server)
    : nodeHttp.createServer(shared, handler);
  // An Expect other than 100-continue would get Node's own bare 417; the service ignores the
  // expectation instead (RFC 9110 allows it) and answers as usual, in its own shape, with its limits.
  server.on('checkExpectation', handler);
  // Node would answer `Expect: 100-continue` with 100 at once; the API sends it only once the request
  // is admitted (unread-bodies.ts), so a refused client is never asked for its body.
  server.on('checkContinue', handler);
  server.keepAliveTimeout = options.keepAliveTimeoutMs;
  server.requestTimeout = options.requestTimeoutMs;
  return server;
}
