/**
 * Bodies of requests refused before reading them (docs/reliability.md): up to 64 KiB still to come is discarded
 * to keep the connection; past that, or chunked, the exchange ends and the connection closes LINGER_MS after the
 * answer, so a reset for unread data cannot make the client drop it. `100 Continue` only once admitted.
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
 * Replaces Node's end-then-destroy after a `Connection: close` answer: reading stops for good, the FIN goes
 * out, and the socket is destroyed LINGER_MS later. `_paused` is Node's mark of a socket it keeps paused;
 * without it the server's discarding of the body would resume reading.
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
      if (declaresBody(request.raw)) (reply.raw as Declaring)[DECLARED] = { reply, admitted: false };
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
 * Each request that declares a body, on its raw response: a fault in the body (it stops coming, or
 * breaks its framing) is answered outside the router (unrouted-answers.ts), with the headers its
 * reply has once the guard has decided, the rate-limit headers of the key or address charged.
 * A property, not a WeakMap keyed by the response: V8's young-generation collections keep a weak
 * map's values alive (only full collections drop them), so each create's request and reply were
 * promoted and died in the old generation, and creates cost up to twice the CPU (BENCHMARKS.md).
 */
const DECLARED = Symbol('declared body');
type Declaring = ServerResponse & { [DECLARED]?: DeclaredBody };

/**
 * The reply of a request that declared a body, once the guard has decided on it: admitted it, or
 * answered it (a refusal needs no body), or after waitMs. Undefined for a request that declared none.
 * (Wrapped: a reply is itself a thenable, which a promise would wait on until it is sent.)
 */
export function replyOnceDecided(response: ServerResponse, waitMs: number): Promise<{ reply: FastifyReply }> | undefined {
  const declared = (response as Declaring)[DECLARED];
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
  const declared = (response as Declaring)[DECLARED];
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
