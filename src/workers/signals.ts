/**
 * Where a server hears SIGTERM, SIGINT and SIGHUP: the process's own, or, in a worker thread (which the
 * operating system never signals), its supervisor passing each on as a message.
 */
import { EventEmitter } from 'node:events';
import type { MessagePort } from 'node:worker_threads';

export type ServerSignal = 'SIGTERM' | 'SIGINT' | 'SIGHUP';

export interface SignalSource {
  on(signal: ServerSignal, handler: (signal: ServerSignal) => void): void;
  once(signal: ServerSignal, handler: (signal: ServerSignal) => void): void;
}

export const processSignals: SignalSource = {
  on: (signal, handler) => void process.on(signal, handler),
  once: (signal, handler) => void process.once(signal, handler),
};

/** A message from the supervisor to one worker. */
export interface SignalMessage {
  type: 'signal';
  signal: ServerSignal;
}

/** The signals a supervisor posts to this worker's port. */
export function supervisorSignals(
  port: MessagePort | { on(event: 'message', listener: (message: unknown) => void): unknown },
): SignalSource {
  const heard = new EventEmitter();
  port.on('message', (message: unknown) => {
    const m = message as Partial<SignalMessage>;
    if (m.type === 'signal' && m.signal) heard.emit(m.signal, m.signal);
  });
  return {
    on: (signal, handler) => void heard.on(signal, handler),
    once: (signal, handler) => void heard.once(signal, handler),
  };
}
