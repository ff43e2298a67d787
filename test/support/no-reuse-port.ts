/**
 * Preloaded into a server process (NO_REUSE_PORT_ENV), this makes the platform look like one without SO_REUSEPORT:
 * a listen that asks for reusePort fails as libuv fails it there (ENOTSUP), and any other listens as usual.
 */
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (this: net.Server, ...args: unknown[]) {
  const options = args[0] as net.ListenOptions | undefined;
  if (typeof options === 'object' && options !== null && options.reusePort) {
    const err = Object.assign(new Error('listen ENOTSUP: operation not supported on socket'), { code: 'ENOTSUP', syscall: 'listen' });
    process.nextTick(() => this.emit('error', err));
    return this;
  }
  return listen.apply(this, args as Parameters<typeof listen>);
} as typeof listen;
