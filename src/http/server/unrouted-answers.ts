/**
 * Answers written before or outside the router, where no route hook runs: errors Node's HTTP parser
 * finds before there is a request, CONNECT (handed over outside the HTTP server), and errors Fastify
 * meets before routing. Each still carries a request id, the baseline headers and the rate-limit
 * headers of the bucket that applies (the client address's: no key was read), is in the Error shape,
 * and is logged and counted through `record`. The ones on raw sockets are written here byte by byte,
 * and the socket's lifetime after them is managed here too.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { LIMITER_WAIT_MS, type AddressLimits } from '../api/address-limits.ts';
import { ApiError, errorBody } from '../contract/api-error.ts';
import { normaliseAddress } from '../../domain/addresses.ts';
import { sendError, toApiError } from '../hooks/error-handling.ts';
import { nodeHttp } from './node-http.ts';
import { replyOnceDecided } from '../hooks/unread-bodies.ts';
import { REQUEST_ID_HEADER } from '../hooks/request-ids.ts';
import { applyBaselineHeaders, BASELINE_HEADERS } from '../hooks/security-headers.ts';

/** How long a socket answered after CONNECT may take to close before it is destroyed. */
const DETACHED_SOCKET_TIMEOUT_MS = 5000;

/** Where the answers written outside the router (below) are logged and counted, like every other answer. */
export type UnroutedAnswerRecorder = (answer: {
  requestId: string;
  method: string | null;
  status: number;
  client: string | undefined;
}) => void;

type HeaderValue = string | number | readonly string[];

/** The fields an answer on a raw socket writes itself, whatever else it was given. */
const OWN_FIELDS = ['content-type', 'content-length', 'content-encoding', 'transfer-encoding', 'connection'];

/** Header lines from sets of fields, a later field replacing an earlier one of the same name. */
function headerLines(...sets: Record<string, HeaderValue | undefined>[]): string {
  const fields = new Map<string, [string, HeaderValue]>();
  for (const set of sets) {
    for (const [name, value] of Object.entries(set)) if (value !== undefined) fields.set(name.toLowerCase(), [name, value]);
  }
  for (const own of OWN_FIELDS) fields.delete(own);
  return [...fields.values()].flatMap(([name, value]) => [value].flat().map((v) => `${name}: ${v}\r\n`)).join('');
}

/** A socket that Node's HTTP server owns: the answer in progress on it, if any. */
type ServerSocket = Socket & { _httpMessage?: ServerResponse | null };

/**
 * The answers written before or outside the router: no route hook runs for them, so each sets the
 * headers every answer carries (request id, BASELINE_HEADERS, the rate-limit headers of the client
 * address: no key was read) and reports itself to `record`.
 */
export function unroutedAnswers(record: UnroutedAnswerRecorder, apiMethods: () => string, limits: AddressLimits) {
  /** Sockets being answered: a parser error comes again with every chunk still arriving. */
  const answering = new WeakSet<Socket>();

  /** Writes an Error answer directly on a socket that never reached the router, then closes it. */
  function writeErrorAndClose(
    socket: Socket,
    apiError: ApiError,
    answer: { method: string | null; client: string | undefined; requestId?: string; headers: Record<string, HeaderValue | undefined> },
  ): void {
    if (!socket.writable) return void socket.destroy();
    // Where no request was parsed there is no caller's id to keep: a new one still lets the answer be
    // matched with its log line.
    const requestId = answer.requestId ?? randomUUID();
    const body = JSON.stringify(errorBody(apiError, requestId));
    const fields = headerLines({ [REQUEST_ID_HEADER]: requestId, ...BASELINE_HEADERS, 'Cache-Control': 'no-store' }, answer.headers);
    socket.end(
      `HTTP/1.1 ${apiError.status} ${nodeHttp.STATUS_CODES[apiError.status]}\r\n${fields}` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    record({ requestId, method: answer.method, status: apiError.status, client: answer.client });
  }

  /** The peer's address, charged for the answer (or reported, for a proxy); then the answer. */
  function answerAddress(socket: Socket, apiError: ApiError, method: string | null, headers: Record<string, string> = {}): void {
    answering.add(socket);
    const peer = socket.remoteAddress === undefined ? undefined : normaliseAddress(socket.remoteAddress);
    const charged = peer === undefined ? Promise.resolve(undefined) : limits.chargePeer(peer);
    void charged.then((limited) => writeErrorAndClose(socket, apiError, { method, client: peer, headers: { ...limited, ...headers } }));
  }

  return {
    /**
     * Errors Node's HTTP parser finds before there is a request (oversized headers, a malformed request
     * line, a timed-out request): answered on the raw socket, still in the Error shape, then closed.
     */
    clientError(error: Error & { code?: string }, socket: ServerSocket): void {
      if (answering.has(socket)) {
        if (!socket.writable) socket.destroy();
        return;
      }
      // A request already being answered (a malformed chunk in the middle of its body) cannot get a
      // second answer on the same connection: it is cut.
      const inFlight = socket._httpMessage;
      if (!socket.writable || inFlight?.headersSent) {
        socket.destroy();
        return;
      }
      const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
      // Nothing of a request ever came (a connection opened and left silent): there is no request to
      // answer, and HTTP times such a connection out by closing it (RFC 9112, section 9.5).
      if (timedOut && socket.bytesRead === 0) {
        socket.destroy();
        return;
      }
      const apiError =
        error.code === 'HPE_HEADER_OVERFLOW'
          ? new ApiError('request_header_fields_too_large', 'Request headers are larger than the server accepts')
          : timedOut
            ? new ApiError('request_timeout', 'The request was not received in time')
            : new ApiError('invalid_request', 'Malformed HTTP request');
      // A body that stopped coming or broke its framing: its request was routed, and so is counted by the
      // guard, once. Once the guard has decided, the answer keeps the reply's headers, the rate-limit
      // headers of the key or address charged among them (outside the API, it reports the address's).
      const decided = inFlight ? replyOnceDecided(inFlight, LIMITER_WAIT_MS) : undefined;
      if (decided) {
        answering.add(socket);
        void decided.then(async ({ reply }) => {
          // The guard refused it meanwhile (a refusal needs no body): that answer stands.
          if (inFlight!.headersSent) return void socket.destroySoon();
          const { request } = reply;
          const client = limits.clientOf(request.raw);
          const limited = reply.hasHeader('x-ratelimit-limit') ? undefined : await limits.report(client);
          writeErrorAndClose(socket, apiError, {
            method: request.method,
            client,
            requestId: request.id,
            headers: { ...reply.getHeaders(), ...limited },
          });
        });
        return;
      }
      answerAddress(socket, apiError, null);
    },

    /**
     * CONNECT (tunnelling) is handed by Node to a separate event, never to the router; without an answer
     * the socket would just be dropped. It gets a 405 in the Error shape instead.
     */
    connect(socket: Socket): void {
      if (!socket.writable) return void socket.destroy();
      answerAddress(socket, new ApiError('method_not_allowed', 'CONNECT is not supported by this service'), 'CONNECT', {
        Allow: apiMethods(),
      });
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
      // The headers were read, so the client is known as the guard knows it, and is charged as it would be.
      const client = limits.clientOf(request.raw);
      void limits.charge(client).then((limited) => {
        if (limited) reply.headers(limited);
        void sendError(reply, apiError);
        record({ requestId: request.id, method: request.method, status: apiError.status, client });
      });
    },
  };
}
