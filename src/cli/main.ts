#!/usr/bin/env -S node --max-semi-space-size=4 --experimental-sqlite
/**
 * The operator's command line: `petstore serve` and `petstore keys create|list|rotate|plan|expire|revoke|unban`.
 * Reads the same environment as the server (DATABASE_URL, PETSTORE_ENV, ...) and applies migrations
 * itself when the database is new.
 */
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { openStore } from '../storage/open.ts';
import type { Store } from '../storage/store.ts';
import { startServer } from '../server.ts';
import { changePlan, createKey, describeKey, formatKeyTable, rotateKey, setExpiry, UsageError } from './keys.ts';

const USAGE = `Usage:
  petstore serve
  petstore keys create --plan free|pro|business|enterprise [--rpm N --rpd N] [--label TEXT] [--json]
  petstore keys list [--json]
  petstore keys rotate ID [--grace 24h] [--json]
  petstore keys plan ID --plan free|pro|business|enterprise [--rpm N --rpd N] [--json]
  petstore keys expire ID --at 2027-01-31T00:00:00Z | --never [--json]
  petstore keys revoke ID
  petstore keys unban ID

Configuration comes from environment variables (see README): PORT, HOST, DATABASE_URL, PETSTORE_ENV, ...`;

async function withStore<T>(config: Config, work: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(config);
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

async function keys(config: Config, args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      plan: { type: 'string' },
      rpm: { type: 'string' },
      rpd: { type: 'string' },
      label: { type: 'string' },
      json: { type: 'boolean', default: false },
      grace: { type: 'string' },
      at: { type: 'string' },
      never: { type: 'boolean', default: false },
    },
  });
  const [action, id, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  switch (action) {
    case 'create': {
      const { key, record } = await withStore(config, (store) => createKey(store, config.environment, values));
      const out = describeKey(record, undefined);
      if (values.json) {
        console.log(JSON.stringify({ ...out, key }));
      } else {
        console.log(`Created ${out.id}: plan ${out.plan} (${out.rpm}/minute, ${out.rpd}/day), ${out.environment} environment.`);
        console.log('This is the only time the key is shown; store it now:');
        console.log(key);
      }
      return;
    }
    case 'rotate': {
      if (!id) throw new UsageError('keys rotate needs a key ID (see petstore keys list)');
      const { key, record, retired } = await withStore(config, (store) => rotateKey(store, id, values.grace, Date.now()));
      const out = describeKey(record, undefined);
      if (values.json) {
        console.log(JSON.stringify({ ...out, key, replaces: retired.id, replacedExpiresAt: retired.expiresAt!.toISOString() }));
      } else {
        console.log(`Created ${out.id} to replace ${retired.id}, which keeps working until ${retired.expiresAt!.toISOString()}.`);
        console.log('This is the only time the key is shown; store it now:');
        console.log(key);
      }
      return;
    }
    case 'plan':
    case 'expire': {
      if (!id) throw new UsageError(`keys ${action} needs a key ID (see petstore keys list)`);
      const record = await withStore(config, (store) =>
        action === 'plan' ? changePlan(store, id, values) : setExpiry(store, id, values.at, values.never),
      );
      const out = describeKey(record, undefined);
      if (values.json) console.log(JSON.stringify(out));
      else if (action === 'plan')
        console.log(`${id} is now on plan ${out.plan} (${out.rpm}/minute, ${out.rpd}/day); running servers see it within 5 seconds.`);
      else console.log(out.expiresAt ? `${id} expires at ${out.expiresAt}.` : `${id} no longer expires.`);
      return;
    }
    case 'list': {
      const rows = await withStore(config, async (store) => {
        const now = Date.now();
        const bans = new Map((await store.listBans(now)).map((b) => [b.keyId, b.bannedUntil.getTime()]));
        return (await store.listKeys()).map((k) => describeKey(k, bans.get(k.id)));
      });
      console.log(values.json ? JSON.stringify(rows) : formatKeyTable(rows, Date.now()));
      return;
    }
    case 'revoke':
    case 'unban': {
      if (!id) throw new UsageError(`keys ${action} needs a key ID (see petstore keys list)`);
      const changed = await withStore(config, (store) => (action === 'revoke' ? store.revokeKey(id) : store.liftBan(id, Date.now())));
      if (!changed) {
        throw new UsageError(action === 'revoke' ? `no active key with ID ${id}` : `key ${id} is not banned`);
      }
      const done = action === 'revoke' ? 'Revoked' : 'Lifted the ban on';
      console.log(values.json ? JSON.stringify({ id, action }) : `${done} ${id}; running servers see it within 5 seconds.`);
      return;
    }
    default:
      throw new UsageError(action ? `unknown keys command "${action}"` : 'keys needs a command');
  }
}

/**
 * An optional `.env` file in the working directory supplies settings the environment leaves unset;
 * a variable that is set wins over the file. Node parses it (process.loadEnvFile).
 */
function loadDotEnv(): void {
  try {
    process.loadEnvFile('.env');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new ConfigError(`.env could not be read: ${(err as Error).message}`);
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    console.log(USAGE);
    return;
  }
  loadDotEnv();
  const config = loadConfig(process.env);
  if (command === 'serve') {
    await startServer(config);
    return;
  }
  if (command === 'keys') return keys(config, rest);
  throw new UsageError(`unknown command "${command}"`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof ConfigError) {
    console.error(`petstore: configuration error: ${err.message}`);
  } else if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    console.error(`petstore: ${(err as Error).message}\n\n${USAGE}`);
  } else {
    console.error(`petstore: ${(err as Error).message}`);
  }
  process.exit(1);
});
