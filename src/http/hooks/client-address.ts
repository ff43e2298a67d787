/** The `client` decoration: each request's address, by the rules of domain/addresses.ts, worked out on first use. */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { resolveClientAddress, type ProxyTrust } from '../../domain/addresses.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The client's normalised address (see resolveClientAddress), worked out on first use. */
    readonly client: string;
  }
}

const RESOLVED = Symbol('client address');

/** The address of the client that sent a request, resolved once and kept on the request. */
export function clientOf(raw: IncomingMessage & { [RESOLVED]?: string }, trust: ProxyTrust): string {
  return (raw[RESOLVED] ??= resolveClientAddress(raw.socket?.remoteAddress, raw.headers['x-forwarded-for'], trust));
}

export const clientAddress = fp(
  async (app: FastifyInstance, { trust }: { trust: ProxyTrust }) => {
    app.decorateRequest('client', {
      getter(this: { raw: IncomingMessage }) {
        return clientOf(this.raw, trust);
      },
    });
  },
  { name: 'client-address' },
);
