/**
 * A TCP proxy the outage tests own, standing between the service and PostgreSQL or Redis. `cut()`
 * drops every connection and then swallows new ones without answering (a network partition);
 * `heal()` forwards again. `hold('requests')` keeps what clients send from reaching the server, and
 * `hold('replies')` keeps the server's answers from the clients, until `release()` delivers them in
 * order (or `releaseOne()` the first): a command the server never saw, or ran and whose answer came
 * too late, or two answers that reach the client one at a time.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type Direction = 'requests' | 'replies';

export class TcpProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #cut = false;
  /** What is held back in each direction, per connection, in the order it came. */
  readonly #held: Record<Direction, Map<Socket, Buffer[]> | undefined> = { requests: undefined, replies: undefined };
  port = 0;

  readonly #targetHost: string;
  readonly #targetPort: number;

  constructor(targetHost: string, targetPort: number) {
    this.#targetHost = targetHost;
    this.#targetPort = targetPort;
    this.#server = createServer((client) => this.#accept(client));
  }

  static async start(targetHost: string, targetPort: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(targetHost, targetPort);
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    proxy.port = (proxy.#server.address() as { port: number }).port;
    return proxy;
  }

  /** Drops every connection, with whatever was held on it. */
  cut(): void {
    this.#cut = true;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    for (const held of Object.values(this.#held)) held?.clear();
  }

  heal(): void {
    this.#cut = false;
  }

  /** From now on, what travels in this direction waits (on open connections and new ones) for release(). */
  hold(direction: Direction): void {
    this.#held[direction] ??= new Map();
  }

  /** How many chunks wait in this direction (one per write of the sender, as they came). */
  held(direction: Direction): number {
    let n = 0;
    for (const chunks of this.#held[direction]?.values() ?? []) n += chunks.length;
    return n;
  }

  /** Delivers the first chunk waiting on each connection in this direction, and holds the rest. */
  releaseOne(direction: Direction): void {
    for (const [to, chunks] of this.#held[direction] ?? []) {
      const chunk = chunks.shift();
      if (chunk && !to.destroyed) to.write(chunk);
    }
  }

  /** Delivers what was held in this direction, in order, and forwards again. */
  release(direction: Direction): void {
    const held = this.#held[direction];
    this.#held[direction] = undefined;
    for (const [to, chunks] of held ?? []) for (const chunk of chunks) if (!to.destroyed) to.write(chunk);
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: Socket): void {
    this.#sockets.add(client);
    client.on('close', () => this.#sockets.delete(client));
    client.on('error', () => client.destroy());
    if (this.#cut) return; // a partition: the connection opens but nothing ever answers
    const upstream = connect(this.#targetPort, this.#targetHost);
    this.#sockets.add(upstream);
    upstream.on('close', () => {
      this.#sockets.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    client.on('data', (chunk: Buffer) => this.#forward('requests', upstream, chunk));
    upstream.on('data', (chunk: Buffer) => this.#forward('replies', client, chunk));
  }

  #forward(direction: Direction, to: Socket, chunk: Buffer): void {
    const held = this.#held[direction];
    if (!held) {
      to.write(chunk);
      return;
    }
    const chunks = held.get(to) ?? [];
    chunks.push(chunk);
    held.set(to, chunks);
  }
}
