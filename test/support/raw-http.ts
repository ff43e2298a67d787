/**
 * HTTP below fetch, for tests about bytes and connections: raw node:net sockets that send exactly the
 * bytes a test wants, when it wants, and read the answers off the wire; and node:http(s) requests
 * whose connection errors keep their codes (ECONNREFUSED, ECONNRESET), from a chosen local address.
 */
import http from 'node:http';
import https from 'node:https';
import { connect, type Socket } from 'node:net';

/** A connected TCP socket to the server at url; from localAddress (127.0.0.2, ...) to be a distinct client. */
export function openSocket(url: string, options: { localAddress?: string } = {}): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ port: Number(port), host: hostname, localAddress: options.localAddress }, () => resolve(socket));
    socket.once('error', reject);
  });
}

export interface Conversation {
  /** Everything the server sent before it closed the connection. */
  text: string;
  closedAt: number;
}

/** Resolves when the server ends the connection (a reset ends it too), with all it sent. */
export function untilClosed(socket: Socket): Promise<Conversation> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.once('close', () => resolve({ text, closedAt: Date.now() }));
  });
}

/** Resolves with the first complete answer (head and Content-Length body) read from the socket. */
export function nextAnswer(socket: Socket): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      if (text.length < end + 4 + length) return;
      socket.off('data', onData);
      socket.off('close', onClose);
      resolve(parseAnswer(text));
    };
    const onClose = () => reject(new Error(`connection closed before a whole answer: ${JSON.stringify(text)}`));
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.on('error', reject);
  });
}

/**
 * Sends bytes on a connection of its own and resolves with everything the server sent until the
 * connection ended, read as UTF-8. A reset after an answer still leaves that answer (a server may
 * answer before reading all that was sent); past timeoutMs the connection is dropped with what came.
 */
export function exchange(url: string, bytes: string | Buffer, options: { timeoutMs?: number } = {}): Promise<string> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let failure: Error | undefined;
    const deadline = setTimeout(() => {
      failure ??= new Error(`no answer within ${timeoutMs} ms`);
      socket.destroy();
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    // Once the server has ended the connection nothing more can come, whatever is still being written.
    socket.on('end', () => socket.destroy());
    socket.on('error', (err) => (failure ??= err));
    socket.once('close', () => {
      clearTimeout(deadline);
      const text = Buffer.concat(chunks).toString('utf8');
      if (text === '' && failure) reject(failure);
      else resolve(text);
    });
    // write, not end: the request is complete without half-closing, and a request asking for
    // Connection: close makes the server close once it has answered.
    socket.write(bytes);
  });
}

/** The single answer to raw bytes sent on a connection of their own (see exchange); fails when none came. */
export async function sendRaw(url: string, bytes: string | Buffer, options: { timeoutMs?: number } = {}): Promise<RawAnswer> {
  const text = await exchange(url, bytes, options);
  const answer = parseAnswer(text);
  if (!answer.status) throw new Error(`no HTTP answer: ${JSON.stringify(text.slice(0, 200))}`);
  return answer;
}

/** The bytes of one HTTP/1.1 request with Connection: close, headers as given (any bytes), and a Content-Length for a body. */
export function requestBytes(method: string, target: string, headers: [string, string][], body?: Buffer): Buffer {
  const head = [`${method} ${target} HTTP/1.1`, 'Host: localhost', 'Connection: close', ...headers.map(([k, v]) => `${k}: ${v}`)];
  if (body) head.push(`Content-Length: ${body.length}`);
  return Buffer.concat([Buffer.from(head.join('\r\n') + '\r\n\r\n', 'utf8'), body ?? Buffer.alloc(0)]);
}

export interface RawAnswer {
  status: number;
  /** Header names lower-cased; a repeated header keeps its last value. */
  headers: Record<string, string>;
  /** The status line and header lines as sent, without the blank line that ends them. */
  head: string;
  /** The body, joined from its chunks when it was sent chunked. */
  body: string;
}

/** Splits one raw HTTP/1.1 answer into status, headers and body. */
export function parseAnswer(raw: string): RawAnswer {
  const end = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, end < 0 ? raw.length : end);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const body = end < 0 ? '' : raw.slice(end + 4);
  return {
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1]),
    headers,
    head,
    body: headers['transfer-encoding'] === 'chunked' ? dechunk(body) : body,
  };
}

/** A chunked body's content: the chunks' data without their sizes, up to the last (empty) chunk. */
export function dechunk(text: string): string {
  let out = '';
  let rest = text;
  for (;;) {
    const eol = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, eol), 16);
    if (!size) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

export interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The body's bytes as they came (a compressed body is not text). */
  bytes: Buffer;
  /** Whether the request went over a connection kept alive from an earlier one. */
  reusedSocket: boolean;
}

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** A connection of its own (no agent) unless an agent is given. */
  agent?: http.Agent | false;
  /** The address the connection comes from (127.0.0.2, ...), to be a distinct client. */
  localAddress?: string;
  /** For https: the certificate to trust, such as a test's self-signed one. */
  ca?: Buffer;
}

/** One request with node:http, or node:https for an https url; errors keep their codes (ECONNREFUSED, ECONNRESET). */
export function request(url: string, options: RequestOptions = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const onResponse = (res: http.IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const bytes = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: bytes.toString('utf8'), bytes, reusedSocket: req.reusedSocket });
      });
      res.on('error', reject);
    };
    const init = {
      method: options.method ?? 'GET',
      headers: options.headers,
      agent: options.agent ?? false,
      localAddress: options.localAddress,
    };
    const req = url.startsWith('https:')
      ? https.request(url, { ...init, ca: options.ca }, onResponse)
      : http.request(url, init, onResponse);
    req.on('error', (err: Error & { reusedSocket?: boolean }) => reject(Object.assign(err, { reusedSocket: req.reusedSocket })));
    req.end(options.body);
  });
}
