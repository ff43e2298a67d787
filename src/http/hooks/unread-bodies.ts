/**
 * Request bodies the service does not read. Most refusals (401, 404, 405, 413, 415, 429, ...) are
 * answered before the body is read; Node would then read and discard the rest of it to keep the
 * connection alive, for as long as the client streams, up to the request timeout. Instead:
 *
 * - a body of at most 64 KiB still to come is discarded, so a client sending an ordinary request
 *   keeps its connection;
 * - anything larger, or of unknown length (chunked), ends the exchange: the answer carries
 *   `Connection: close`, the server stops reading, sends its FIN after the answer and closes the
 *   connection LINGER_MS later. A refused upload costs the server at most what was already in its
 *   buffers. The short linger is for the client: closing a connection with unread data in it sends
 *   a reset, and a reset that arrives with the answer can make the client's system drop the answer
 *   before the client has read it.
 *
 * `Expect: 100-continue` is answered with `100 Continue` only once the request has been admitted
 * (authenticated and within its rate limit) and its body would be read; a refused request gets its
 * final answer without ever being asked for its body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest, RequestPayload } from 'fastify';
import fp from 'fastify-plugin';
import { BODY_LIMIT_BYTES } from './json-bodies.ts';

/** The most of an unread body that is discarded to keep a connection; beyond it, the connection closes. */
export const DRAIN_LIMIT_BYTES = 64 * 1024;

function declaredLength(request: IncomingMessage): number | undefined {
  const header = request.headers['content-length'];
  return header === undefined ? undefined : Number(header);
}

/** Whether answering now would leave more than DRAIN_LIMIT_BYTES (or an unknown amount) of body unread. */
function leavesLargeBodyUnread(request: IncomingMessage): boolean {
  if (request.complete) return false;
  if (request.headers['transfer-encoding'] !== undefined) return true;
  const length = declaredLength(request);
  return length !== undefined && length > DRAIN_LIMIT_BYTES;
}

/** How long a connection refused with a body still coming stays half-closed before it is closed. */
export const LINGER_MS = 300;

type ServerSocket = Socket & { _paused?: boolean };

/**
 * Replaces what Node does once an answer with `Connection: close` is written (end, then destroy as
 * soon as the FIN is out): reading stops for good, the FIN goes out, and the connection is destroyed
 * LINGER_MS later. `_paused` is how Node's HTTP server marks a socket it keeps paused; without it
 * the server's discarding of the unread body would start reading again.
 */
function lingeringClose(this: ServerSocket): void {
  this._paused = true;
  this.pause();
  if (this.writable) this.end();
  // Not unref'd: while paused the socket sees no close from the client, and a server closing
  // meanwhile must wait for this timer rather than find nothing left to wait for.
  setTimeout(() => this.destroy(), LINGER_MS);
}

export const unreadBodies = fp(
  async (app: FastifyInstance) => {
    // Synchronous, like the other per-request hooks.
    app.addHook('onRequest', (request, reply, done) => {
      if (declaresBody(request.raw)) declaredBodies.set(reply.raw as ServerResponse, { reply, admitted: false });
      done();
    });
    app.addHook('onSend', (request, reply, payload, done) => {
      if (leavesLargeBodyUnread(request.raw)) {
        reply.header('Connection', 'close');
        (request.raw.socket as ServerSocket).destroySoon = lingeringClose;
      }
      done(null, payload);
    });
  },
  { name: 'unread-bodies' },
);

/** Whether a request asked to be told to go on before sending its body. */
function expectsContinue(request: IncomingMessage): boolean {
  return request.headers.expect?.toLowerCase() === '100-continue';
}

/** A request that declares a body: its reply, and whether the guard has admitted it. */
interface DeclaredBody {
  reply: FastifyReply;
  admitted: boolean;
  onAdmitted?: () => void;
}

/**
 * Each request that declares a body, by its raw response: a fault in the body (it stops coming, or
 * breaks its framing) is answered outside the router (unrouted-answers.ts), with the headers its
 * reply has once the guard has decided, the rate-limit headers of the key or address charged.
 */
const declaredBodies = new WeakMap<ServerResponse, DeclaredBody>();

/**
 * The reply of a request that declared a body, once the guard has decided on it: admitted it, or
 * answered it (a refusal needs no body), or after waitMs. Undefined for a request that declared none.
 * (Wrapped: a reply is itself a thenable, which a promise would wait on until it is sent.)
 */
export function replyOnceDecided(response: ServerResponse, waitMs: number): Promise<{ reply: FastifyReply }> | undefined {
  const declared = declaredBodies.get(response);
  if (declared === undefined) return undefined;
  const { reply } = declared;
  if (declared.admitted || response.headersSent) return Promise.resolve({ reply });
  return new Promise((resolve) => {
    const decided = () => {
      clearTimeout(timer);
      response.off('finish', decided);
      declared.onAdmitted = undefined;
      resolve({ reply });
    };
    const timer = setTimeout(decided, waitMs);
    response.once('finish', decided);
    declared.onAdmitted = decided;
  });
}

function declaresBody(request: IncomingMessage): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * A preParsing hook for admitted requests: sends `100 Continue` when the client waits for it and the
 * body will be read (a JSON body within the size limit); otherwise the answer to come is final.
 */
export function continueAdmitted(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: RequestPayload,
  done: (err: null, payload: RequestPayload) => void,
): void {
  const raw = request.raw;
  const response = reply.raw as ServerResponse;
  const declared = declaredBodies.get(response);
  if (declared) {
    declared.admitted = true;
    declared.onAdmitted?.();
  }
  if (expectsContinue(raw) && !raw.complete && willReadBody(raw)) response.writeContinue();
  done(null, payload);
}

function willReadBody(request: IncomingMessage): boolean {
  const type = request.headers['content-type']?.split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') return false;
  const length = declaredLength(request);
  return length === undefined ? request.headers['transfer-encoding'] !== undefined : length > 0 && length <= BODY_LIMIT_BYTES;
}
