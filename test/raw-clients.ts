/**
 * Clients below fetch, for tests about connections: raw node:net sockets that send exactly the bytes
 * a test wants, when it wants, and node:http requests whose connection errors keep their codes.
 */
import http from 'node:http';
import { connect, type Socket } from 'node:net';

/** A connected TCP socket to the server at url. */
export function openSocket(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket));
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

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits one raw HTTP/1.1 answer into status, lower-cased headers and body. */
export function parseAnswer(raw: string): RawAnswer {
  const end = raw.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = raw.slice(0, end < 0 ? raw.length : end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1]), headers, body: end < 0 ? '' : raw.slice(end + 4) };
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

/** One request with node:http; errors keep their codes (ECONNREFUSED, ECONNRESET). */
export function request(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; agent?: http.Agent | false },
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? 'GET', headers: options.headers, agent: options.agent ?? false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const bytes = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: bytes.toString('utf8'), bytes, reusedSocket: req.reusedSocket });
      });
      res.on('error', reject);
    });
    req.on('error', (err: Error & { reusedSocket?: boolean }) => reject(Object.assign(err, { reusedSocket: req.reusedSocket })));
    req.end(options.body);
  });
}
