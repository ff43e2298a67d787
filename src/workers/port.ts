/**
 * The port the workers share. With SO_REUSEPORT, any process of the same user that asks for it too may join a
 * port, so the supervisor first takes it alone: a port in use (another server, or a second petstore) is refused
 * as one thread's would be, and PORT=0 becomes one port for every worker.
 */
import net from 'node:net';
import { listenRefusal } from '../http/server/listen-refusal.ts';

function listenOnce(options: net.ListenOptions): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(options, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface SharedPort {
  /** The port, chosen by the system when PORT is 0. */
  port: number;
  /** Whether this platform lets several threads listen on it (Linux, the BSDs); Node.js refuses reusePort elsewhere. */
  reusePort: boolean;
}

/** Takes the port alone, with PORT and HOST named when it cannot; then asks whether threads may share one. */
export async function claimSharedPort(host: string, port: number): Promise<SharedPort> {
  const claimed = await listenOnce({ host, port }).catch((err: unknown) => {
    throw listenRefusal(err, host, port);
  });
  const reusePort = await listenOnce({ host, port: 0, reusePort: true }).then(
    () => true,
    () => false,
  );
  return { port: claimed, reusePort };
}
