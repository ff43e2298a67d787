/**
 * The private metrics listener (METRICS_PORT): a bare HTTP server answering `GET /metrics` without a token,
 * on 127.0.0.1 unless METRICS_HOST says otherwise, and nothing else.
 */
import type { Server, ServerResponse } from 'node:http';
import type { Exposition } from '../../workers/process-metrics.ts';
import { ApiError, errorBody } from '../contract/api-error.ts';
import { nodeHttp } from './node-http.ts';

function answer(response: ServerResponse, status: number, type: string, body: string): void {
  response.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' }).end(body);
}

function answerError(response: ServerResponse, error: ApiError): void {
  if (error.headers) for (const [name, value] of Object.entries(error.headers)) response.setHeader(name, value);
  answer(response, error.status, 'application/json; charset=utf-8', JSON.stringify(errorBody(error)));
}

/** `metrics`: one server's registry, or the whole process's when it runs several workers. */
export async function startMetricsListener(metrics: Exposition, port: number, host: string): Promise<Server> {
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
    metrics.text().then(
      (text) => answer(response, 200, metrics.contentType, text),
      () => answerError(response, new ApiError('internal_error', 'The metrics could not be collected')),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
