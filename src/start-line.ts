/** The lines the server logs once it listens: where it serves, on what, where its docs are (never a password), and what to do next. */
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { redisUrls, type Config } from './config.ts';
import { docsUrlBeside } from './http/urls.ts';
import { describeRedis } from './limits/open.ts';
import { describePostgres } from './storage/open.ts';

export type StartFacts = ReturnType<typeof startFacts>;

export function startFacts(config: Readonly<Config>, address: AddressInfo) {
  const storage =
    config.database.engine === 'sqlite'
      ? { engine: 'sqlite' as const, path: config.database.path === ':memory:' ? ':memory:' : resolve(config.database.path) }
      : { engine: 'postgres' as const, target: describePostgres(config.database.url) };
  const urls = redisUrls(config);
  const limiter = urls
    ? { engine: 'redis' as const, target: describeRedis(urls, config.redisClusterNodes !== undefined) }
    : { engine: 'memory' as const };
  const scheme = config.tls ? 'https' : 'http';
  const at = (host: string) => `${scheme}://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
  // A wildcard address is not one to browse to; from this machine, loopback reaches it.
  const local = address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '::1' : config.host;
  // Behind a proxy, the public address of the API names where clients find the docs page too.
  const publicDocs = /^https?:/.test(config.publicBaseUrl) ? docsUrlBeside(config.publicBaseUrl) : undefined;
  return {
    environment: config.environment,
    storage,
    limiter,
    workers: config.workers,
    address: at(address.address),
    docs: publicDocs ?? `${at(local)}/docs`,
  };
}

export function startMessage(version: string, facts: StartFacts): string {
  const storage = facts.storage.engine === 'sqlite' ? `SQLite ${facts.storage.path}` : facts.storage.target;
  const limits = facts.limiter.engine === 'redis' ? `rate limits in ${facts.limiter.target}` : 'rate limits in memory';
  const workers = facts.workers === 1 ? '1 worker' : `${facts.workers} workers`;
  return `petstore ${version} serving ${facts.environment} on ${facts.address} (${storage}, ${limits}, ${workers}); docs at ${facts.docs}`;
}

/**
 * The start's last line: what a newcomer does next (the CLI as `npm start` built it, as the README runs it), and
 * which keys this server takes; once the environment has a key, only where the docs are.
 */
export function nextStep(facts: StartFacts, hasKey: boolean): string {
  if (hasKey) return `next: open ${facts.docs}`;
  const environment = facts.environment === 'production' ? 'PETSTORE_ENV=production, the default' : `PETSTORE_ENV=${facts.environment}`;
  return (
    `next: create a ${facts.environment} key with \`./dist/cli/main.js keys create --plan free\` in the project's folder ` +
    `(this server takes ${facts.environment} keys only: ${environment}), then open ${facts.docs}`
  );
}
