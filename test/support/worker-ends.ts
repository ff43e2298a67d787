/**
 * Ends one worker thread of a running server process from outside, as a fault would: through the process's
 * inspector (started with INSPECT_ENV), the worker is made to throw an error nothing catches. The server's code
 * has no hook for it; a debugger attached in production could do the same.
 */
import type { ServerProcess } from './processes.ts';
import { eventually } from './waiting.ts';

/** The environment that opens the inspector of the server process on a port of its choosing, on loopback. */
export const INSPECT_ENV = { NODE_OPTIONS: '--inspect=127.0.0.1:0' };

interface Attached {
  sessionId: string;
  workerInfo: { workerId: string; title: string };
}

/** The DevTools protocol over the process's inspector WebSocket: calls, and the workers it attaches to. */
class Inspector {
  readonly #socket: WebSocket;
  #next = 1;
  readonly #waiting = new Map<number, (result: unknown) => void>();
  readonly attached: Attached[] = [];
  /** Answers from workers' sessions, by the id of the message sent to them. */
  readonly #fromWorkers = new Map<number, (result: unknown) => void>();

  constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.addEventListener('message', (event) => {
      const message = JSON.parse(String(event.data)) as {
        id?: number;
        result?: unknown;
        method?: string;
        params?: Record<string, unknown>;
      };
      if (message.id !== undefined) this.#waiting.get(message.id)?.(message.result);
      if (message.method === 'NodeWorker.attachedToWorker') this.attached.push(message.params as unknown as Attached);
      if (message.method === 'NodeWorker.receivedMessageFromWorker') {
        const inner = JSON.parse(String(message.params!.message)) as { id?: number; result?: unknown };
        if (inner.id !== undefined) this.#fromWorkers.get(inner.id)?.(inner.result);
      }
    });
  }

  static async open(url: string): Promise<Inspector> {
    const socket = new WebSocket(url);
    await new Promise((resolve, reject) => {
      socket.addEventListener('open', resolve, { once: true });
      socket.addEventListener('error', reject, { once: true });
    });
    return new Inspector(socket);
  }

  call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.#next++;
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      this.#socket.send(JSON.stringify({ id, method, params }));
    });
  }

  /** Evaluates `expression` in the worker of that session; its result's value. */
  async evaluate(sessionId: string, expression: string): Promise<unknown> {
    const id = this.#next++;
    const answered = new Promise<unknown>((resolve) => this.#fromWorkers.set(id, resolve));
    const message = JSON.stringify({ id, method: 'Runtime.evaluate', params: { expression, returnByValue: true } });
    await this.call('NodeWorker.sendMessageToWorker', { sessionId, message });
    return ((await answered) as { result?: { value?: unknown } }).result?.value;
  }

  close(): void {
    this.#socket.close();
  }
}

/** The inspector's WebSocket address, from the line Node.js writes to standard error. */
function inspectorUrl(server: ServerProcess): string | undefined {
  return /Debugger listening on (ws:\/\/\S+)/.exec(server.stderr())?.[1];
}

/** Makes worker `index` (1 to WORKERS) of the server throw an uncaught error; resolves once it was told to. */
export async function endWorker(server: ServerProcess, index: number, reason = 'ended by the test'): Promise<void> {
  await eventually(async () => inspectorUrl(server) !== undefined, 10_000, 50);
  const inspector = await Inspector.open(inspectorUrl(server)!);
  try {
    await inspector.call('NodeWorker.enable', { waitForDebuggerOnStart: false });
    for (const { sessionId } of inspector.attached) {
      const which = await inspector.evaluate(sessionId, "process.getBuiltinModule('node:worker_threads').workerData?.index");
      if (which !== index) continue;
      await inspector.evaluate(sessionId, `setImmediate(() => { throw new Error(${JSON.stringify(reason)}); }), true`);
      return;
    }
    throw new Error(`no worker ${index} among the ${inspector.attached.length} the inspector attached to`);
  } finally {
    inspector.call('NodeWorker.disable').catch(() => undefined);
    inspector.close();
  }
}
