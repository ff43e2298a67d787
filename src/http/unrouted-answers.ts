/**
 * Answers written before or outside the router, where no route hook runs: errors Node's HTTP parser
 * finds before there is a request, CONNECT (handed over outside the HTTP server), and errors Fastify
 * meets before routing. Each still carries a request id and the baseline headers, is in the Error
 * shape, and is logged and counted through `record`. The ones on raw sockets are written here byte
 * by byte, and the socket's lifetime after them is managed here too.
 */
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, errorBody } from './api-error.ts';
import { normaliseAddress } from './client-address.ts';
import { sendError, toApiError } from './errors.ts';
import { nodeHttp } from './node-http.ts';
import { REQUEST_ID_HEADER } from './request-id.ts';
import { applyBaselineHeaders, BASELINE_HEADERS } from './security-headers.ts';

/** How long a socket answered after CONNECT may take to close before it is destroyed. */
const DETACHED_SOCKET_TIMEOUT_MS = 5000;

/** Where the answers written outside the router (below) are logged and counted, like every other answer. */
export type UnroutedAnswerRecorder = (answer: {
  requestId: string;
  method: string | null;
  status: number;
  client: string | undefined;
}) => void;

/**
 * The answers written before or outside the router: no route hook runs for them, so each sets the
 * headers every answer carries (request id, BASELINE_HEADERS) and reports itself to `record`.
 */
export function unroutedAnswers(record: UnroutedAnswerRecorder, apiMethods: () => string) {
  /** Writes an Error answer directly on a socket that never reached the router, then closes it. */
  function writeErrorAndClose(socket: Socket, apiError: ApiError, method: string | null, extraHeaders = ''): void {
    // No request was parsed, so there is no caller's id to keep: a new one still lets the answer be
    // matched with its log line.
    const requestId = randomUUID();
    const body = JSON.stringify(errorBody(apiError, requestId));
    const baseline = Object.entries(BASELINE_HEADERS)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.end(
      `HTTP/1.1 ${apiError.status} ${nodeHttp.STATUS_CODES[apiError.status]}\r\n${REQUEST_ID_HEADER}: ${requestId}\r\n${baseline}` +
        `Cache-Control: no-store\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `${extraHeaders}Connection: close\r\n\r\n${body}`,
    );
    record({ requestId, method, status: apiError.status, client: socket.remoteAddress && normaliseAddress(socket.remoteAddress) });
  }

  return {
    /**
     * Errors Node's HTTP parser finds before there is a request (oversized headers, a malformed request
     * line, a timed-out request): answered on the raw socket, still in the Error shape, then closed.
     */
    clientError(error: Error & { code?: string }, socket: Socket & { _httpMessage?: { headersSent: boolean } | null }): void {
      // A request already being answered (a malformed chunk in the middle of its body) cannot get a
      // second answer on the same connection: it is cut.
      if (!socket.writable || socket._httpMessage?.headersSent) {
        socket.destroy();
        return;
      }
      const apiError =
        error.code === 'HPE_HEADER_OVERFLOW'
          ? new ApiError('request_header_fields_too_large', 'Request headers are larger than the server accepts')
          : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
            ? new ApiError('request_timeout', 'The request was not received in time')
            : new ApiError('invalid_request', 'Malformed HTTP request');
      writeErrorAndClose(socket, apiError, null);
    },

    /**
     * CONNECT (tunnelling) is handed by Node to a separate event, never to the router; without an answer
     * the socket would just be dropped. It gets a 405 in the Error shape instead.
     */
    connect(socket: Socket): void {
      if (!socket.writable) return void socket.destroy();
      writeErrorAndClose(
        socket,
        new ApiError('method_not_allowed', 'CONNECT is not supported by this service'),
        'CONNECT',
        `Allow: ${apiMethods()}\r\n`,
      );
      // The socket has left the HTTP server: nothing reads it any more, so bytes the client sent after
      // its request (a body, a tunnel's first packets) would keep it from ever seeing the client's FIN
      // and closing, and the server from ever finishing a close. They are discarded, and since the
      // server's timeouts no longer apply to it, it is given one of its own.
      socket.resume();
      socket.setTimeout(DETACHED_SOCKET_TIMEOUT_MS, () => socket.destroy());
    },

    /** Errors Fastify meets before routing, such as a path with invalid percent-encoding. */
    frameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
      reply.header(REQUEST_ID_HEADER, request.id);
      applyBaselineHeaders(reply);
      // Not routed, so not known to be outside the API: kept by no cache, like the API's answers.
      reply.header('Cache-Control', 'no-store');
      const apiError =
        error.code === 'FST_ERR_BAD_URL'
          ? new ApiError('invalid_request', 'The request path is not valid percent-encoded text')
          : toApiError(error);
      void sendError(reply, apiError);
      record({ requestId: request.id, method: request.method, status: apiError.status, client: request.client });
    },
  };
}
