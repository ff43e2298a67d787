/**
 * The private metrics listener (METRICS_PORT): a second, bare HTTP server that answers `GET /metrics`
 * without a token, on 127.0.0.1 unless METRICS_HOST says otherwise, for a Prometheus that scrapes
 * each instance on its own network. Nothing else is served on it, and nothing of it is reachable
 * through the public listener.
 */
import type { Server, ServerResponse } from 'node:http';
import type { Metrics } from '../../metrics.ts';
import { ApiError, errorBody } from '../contract/api-error.ts';
import { nodeHttp } from './node-http.ts';

function answer(response: ServerResponse, status: number, type: string, body: string): void {
  response.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' }).end(body);
}

function answerError(response: ServerResponse, error: ApiError): void {
  if (error.headers) for (const [name, value] of Object.entries(error.headers)) response.setHeader(name, value);
  answer(response, error.status, 'application/json; charset=utf-8', JSON.stringify(errorBody(error)));
}

export async function startMetricsListener(metrics: Metrics, port: number, host: string): Promise<Server> {
  const server = nodeHttp.createServer((request, response) => {
    const path = request.url?.split('?')[0];
    if (path !== '/metrics') return answerError(response, new ApiError('not_found', 'Only GET /metrics is served on the metrics listener'));
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      return answerError(
        response,
        new ApiError('method_not_allowed', `${request.method} is not allowed on /metrics; allowed: GET, HEAD`, {
          headers: { Allow: 'GET, HEAD' },
        }),
      );
    }
    metrics.registry.metrics().then(
      (text) => answer(response, 200, metrics.registry.contentType, text),
      () => answerError(response, new ApiError('internal_error', 'The metrics could not be collected')),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
