/**
 * The configuration table (src/config.ts) with real environments: its defaults, each kind of refusal
 * and its one-line message, the frozen result, and docs/configuration.md's table written from it. KEEP_ALIVE_TIMEOUT_MS
 * (processes/slow-clients.test.ts), the shutdown timings (processes/shutdown.test.ts) and the forms of TRUST_PROXY
 * (units/client-address.test.ts) are checked beside the behaviour they configure.
 */
import { quotaCores, usableCores } from '../../src/workers/cores.ts';
import { workerShare } from '../../src/workers/shares.ts';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { CONFIG_VARIABLES, ConfigError, loadConfig, lookalikeWarnings, VARIABLES } from '../../src/config.ts';
import { CONFIG_DOC, configTable, ENV_EXAMPLE, envExample, TABLE_END, TABLE_START } from '../../scripts/config-docs.ts';

/** Asserts loadConfig refuses env with a ConfigError of one line, starting with `name`, matching `message`. */
function refuses(env: Readonly<Record<string, string | undefined>>, name: string, message?: RegExp): string {
  let error: unknown;
  try {
    loadConfig(env);
  } catch (err) {
    error = err;
  }
  assert.ok(error instanceof ConfigError, `${JSON.stringify(env)} was accepted, or failed otherwise: ${String(error)}`);
  assert.ok(error.message.startsWith(name), `the message names ${name} first: ${error.message}`);
  assert.ok(!error.message.includes('\n'), `one line: ${error.message}`);
  if (message) assert.match(error.message, message);
  return error.message;
}

test("docs/configuration.md's table is the one src/config.ts gives", () => {
  const doc = readFileSync(CONFIG_DOC, 'utf8');
  const start = doc.indexOf(TABLE_START);
  const end = doc.indexOf(TABLE_END);
  assert.ok(start !== -1 && end > start, `docs/configuration.md has lost the markers ${TABLE_START} and ${TABLE_END}`);
  const written = doc.slice(start + TABLE_START.length, end).trim();
  assert.equal(written, configTable(), 'the configuration table differs from src/config.ts: run `npm run docs:config`');
});

test('.env.example is the one src/config.ts gives: every variable, and each default it shows is the default', () => {
  const example = readFileSync(ENV_EXAMPLE, 'utf8');
  assert.equal(example, envExample(), '.env.example differs from src/config.ts: run `npm run docs:config`');
  const settings = [...example.matchAll(/^# ([A-Z][A-Z0-9_]*)=(.*)$/gm)].map(([, name, value]) => [name!, value!] as const);
  assert.deepEqual(
    settings.map(([name]) => name),
    CONFIG_VARIABLES,
  );
  // Uncommented as they stand, the lines with a value change nothing: each is the default.
  const uncommented = Object.fromEntries(settings.filter(([, value]) => value !== ''));
  assert.ok(Object.keys(uncommented).length > 25, 'most settings show their default');
  assert.deepEqual(loadConfig(uncommented), loadConfig({}));
});

test('each variable is named once, and the list of names is the table', () => {
  assert.equal(new Set(CONFIG_VARIABLES).size, CONFIG_VARIABLES.length);
  assert.deepEqual(
    CONFIG_VARIABLES,
    VARIABLES.flatMap((v) => v.names),
  );
  for (const name of CONFIG_VARIABLES) assert.match(name, /^[A-Z][A-Z0-9_]*$/);
  for (const v of VARIABLES) assert.ok(v.description.length > 0 && !v.description.includes('\n'), `${v.names} has a one-line description`);
});

test('an empty environment gives the defaults', () => {
  assert.deepEqual(loadConfig({}), {
    port: 8080,
    host: '127.0.0.1',
    database: { engine: 'sqlite', path: './data/petstore.db', createFolder: true },
    redisUrl: undefined,
    redisClusterNodes: undefined,
    redisTlsCaFile: undefined,
    redisKeyPrefix: 'petstore',
    rateLimitBlockMax: 100,
    workers: usableCores(),
    rateLimitMemoryBytes: 64 * 1024 * 1024,
    environment: 'production',
    logLevel: 'info',
    trustProxy: { kind: 'none' },
    publicBaseUrl: '/v1',
    sqliteSynchronous: 'normal',
    sqliteLockWaitMs: 2000,
    migrationLockWaitMs: 300_000,
    migrations: 'apply',
    migrationStatementTimeoutMs: 300_000,
    backupDir: undefined,
    keyCacheTtlMs: 2000,
    anonymousPerMinute: 60,
    docsPerMinute: 300,
    banThreshold: 20,
    banDurationSeconds: 900,
    banGraceMs: 1000,
    pageCacheBytes: 24 * 1024 * 1024,
    petCacheBytes: 8 * 1024 * 1024,
    pageCacheTtlMs: 1000,
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 72_000,
    maxConnections: 10_000,
    maxConnectionsPerAddress: 256,
    shutdownDrainMs: 1000,
    shutdownTimeoutMs: 10_000,
    metricsToken: undefined,
    metricsPort: undefined,
    metricsHost: '127.0.0.1',
    otlpEndpoint: undefined,
    otelServiceName: 'petstore',
    corsOrigins: [],
    tls: undefined,
  });
});

test('a variable set to its default, or to the empty string, reads as unset', () => {
  const defaults = loadConfig({});
  for (const v of VARIABLES) {
    for (const name of v.names) assert.deepEqual(loadConfig({ [name]: '' }), defaults, `${name}=""`);
    if (typeof v.default === 'number' || typeof v.default === 'string') {
      assert.deepEqual(loadConfig({ [v.names[0]!]: String(v.default) }), defaults, `${v.names[0]}=${v.default}`);
    }
  }
});

test('values are read as given', () => {
  const config = loadConfig({
    PORT: '0',
    DATABASE_URL: 'file:///var/lib/petstore.db',
    REDIS_URL: 'rediss://cache.internal:6380',
    PETSTORE_ENV: 'staging',
    LOG_LEVEL: 'silent',
    SQLITE_SYNCHRONOUS: 'full',
    MIGRATION_LOCK_WAIT_MS: '0',
    MIGRATIONS: 'refuse',
    MIGRATION_STATEMENT_TIMEOUT_MS: '0',
    BAN_DURATION_SECONDS: '2592000',
    METRICS_PORT: '9464',
    CORS_ORIGINS: ' https://app.example.com , http://localhost:3000',
    TLS_CERT: '/etc/tls/cert.pem',
    TLS_KEY: '/etc/tls/key.pem',
  });
  assert.equal(config.port, 0);
  assert.deepEqual(config.database, { engine: 'sqlite', path: '/var/lib/petstore.db', createFolder: false });
  assert.equal(config.redisUrl, 'rediss://cache.internal:6380');
  assert.deepEqual([config.environment, config.logLevel, config.sqliteSynchronous], ['staging', 'silent', 'full']);
  assert.equal(config.migrationLockWaitMs, 0);
  assert.deepEqual([config.migrations, config.migrationStatementTimeoutMs], ['refuse', 0]);
  assert.equal(config.banDurationSeconds, 30 * 86_400);
  assert.equal(config.metricsPort, 9464);
  assert.deepEqual(config.corsOrigins, ['https://app.example.com', 'http://localhost:3000']);
  assert.deepEqual(config.tls, { certPath: '/etc/tls/cert.pem', keyPath: '/etc/tls/key.pem' });
  assert.deepEqual(loadConfig({ DATABASE_URL: 'postgresql://app@db:5432/petstore' }).database, {
    engine: 'postgres',
    url: 'postgresql://app@db:5432/petstore',
  });
  assert.equal(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins, '*');
});

test('the configuration is frozen, its list of origins too', () => {
  const config = loadConfig({ CORS_ORIGINS: 'https://app.example.com' });
  assert.ok(Object.isFrozen(config));
  assert.ok(Object.isFrozen(config.corsOrigins));
  assert.throws(() => Object.assign(config, { port: 1 }), TypeError);
  assert.equal(config.port, 8080);
});

test('every integer variable refuses values outside its range, signs, exponents and words, naming itself and the range', () => {
  const integers = VARIABLES.flatMap((v) =>
    'type' in v.schema && v.schema.type === 'integer' ? [{ name: v.names[0]!, schema: v.schema }] : [],
  );
  assert.ok(integers.length >= 15, `${integers.length} integer variables`);
  for (const { name, schema } of integers) {
    const [min, max] = [schema.minimum, schema.maximum];
    assert.ok(Number.isInteger(min) && Number.isInteger(max), `${name} has a range`);
    const range = new RegExp(` must be an integer from ${min} to ${max}, got "`);
    refuses({ [name]: String(max + 1) }, name, range);
    if (min > 0) refuses({ [name]: String(min - 1) }, name, range);
    for (const bad of ['-1', '1e3', '2.5', ' 80', 'soon']) refuses({ [name]: bad }, name, range);
  }
  assert.equal(refuses({ PORT: '70000' }, 'PORT'), 'PORT must be an integer from 0 to 65535, got "70000"');
});

test('every enum variable refuses other words, listing what it accepts', () => {
  const enums = VARIABLES.filter((v) => 'enum' in v.schema);
  assert.deepEqual(
    enums.map((v) => v.names[0]),
    ['PETSTORE_ENV', 'LOG_LEVEL', 'SQLITE_SYNCHRONOUS', 'MIGRATIONS'],
  );
  for (const v of enums) refuses({ [v.names[0]!]: 'Loud' }, v.names[0]!, /must be one of [a-z, ]+, got "Loud"$/);
  assert.equal(
    refuses({ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'),
    'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
  );
});

test('strings outside their pattern are refused, and a value that may hold a secret is never echoed', () => {
  refuses({ HOST: 'my host' }, 'HOST', /must be a host name or address, got "my host"$/);
  refuses({ METRICS_HOST: 'a/b' }, 'METRICS_HOST', /got "a\/b"$/);
  refuses({ REDIS_KEY_PREFIX: 'x'.repeat(65) }, 'REDIS_KEY_PREFIX', /must be 1 to 64 letters, digits or _.:-, got/);
  const secrets: Record<string, string>[] = [
    { DATABASE_URL: 'mysql://root:hunter2hunter2@db/app' },
    { DATABASE_URL: 'postgres://user:hunter2hunter2@host:notaport/db' },
    { REDIS_URL: 'http://:hunter2hunter2@cache' },
    { REDIS_CLUSTER_NODES: 'rediss://u:hunter2hunter2@node-1:6379,node-2:6379' },
    { METRICS_TOKEN: 'hunter2 hunter2 hunter2' },
  ];
  for (const env of secrets) {
    const [name] = Object.keys(env) as [string];
    const message = refuses(env, name);
    assert.ok(!message.includes('hunter2'), `the secret was echoed: ${message}`);
  }
});

test('TRUST_PROXY=true is refused with the reason, and a list that is not addresses names what is accepted', () => {
  refuses({ TRUST_PROXY: 'true' }, 'TRUST_PROXY', /TRUST_PROXY=true would believe any address a client writes in X-Forwarded-For/);
  refuses(
    { TRUST_PROXY: '10.0.0.1, proxy' },
    'TRUST_PROXY',
    /must be false, a hop count or a comma-separated list of proxy addresses or CIDRs/,
  );
});

test('WORKERS defaults to the cores the process may use, with Redis too', () => {
  assert.equal(loadConfig({}).workers, usableCores());
  assert.equal(loadConfig({ WORKERS: '3' }).workers, 3);
  assert.equal(loadConfig({ REDIS_URL: 'redis://127.0.0.1:6379' }).workers, usableCores());
  assert.equal(loadConfig({ REDIS_URL: 'redis://127.0.0.1:6379', WORKERS: '2' }).workers, 2);
});

test('the cores the process may use: its affinity, within a cgroup quota rounded up (v2, then v1), at least one', () => {
  const files = (entries: Record<string, string>) => (path: string) => entries[path];
  assert.equal(quotaCores(files({})), undefined);
  assert.equal(quotaCores(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': 'max 100000\n' })), undefined);
  assert.equal(quotaCores(files({ '/proc/self/cgroup': '0::/pod\n', '/sys/fs/cgroup/pod/cpu.max': '150000 100000\n' })), 1.5);
  assert.equal(
    quotaCores(
      files({
        '/proc/self/cgroup': '4:cpu,cpuacct:/docker/abc\n',
        '/sys/fs/cgroup/cpu/docker/abc/cpu.cfs_quota_us': '200000\n',
        '/sys/fs/cgroup/cpu/docker/abc/cpu.cfs_period_us': '100000\n',
      }),
    ),
    2,
  );
  assert.equal(quotaCores(files({ '/proc/self/cgroup': '4:cpu:/\n', '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1\n' })), undefined);
  assert.equal(usableCores(8, 1.5), 2);
  assert.equal(usableCores(2, 16), 2);
  assert.equal(usableCores(4, undefined), 4);
  assert.equal(usableCores(4, 0.1), 1);
});

test("a worker's share of the process's pool: near-equal, adding up to it, at least one each", () => {
  const shares = (workers: number) => Array.from({ length: workers }, (_, i) => workerShare(10, i + 1, workers));
  assert.deepEqual(shares(1), [10]);
  assert.deepEqual(shares(4), [3, 3, 2, 2]);
  assert.deepEqual(shares(16), Array(16).fill(1));
});

test('REDIS_CLUSTER_NODES takes seed URLs, excludes REDIS_URL, and a CA file needs a rediss:// URL', () => {
  const config = loadConfig({ REDIS_CLUSTER_NODES: ' redis://10.0.0.1:7000 , rediss://u:p@10.0.0.2:7001' });
  assert.deepEqual(config.redisClusterNodes, ['redis://10.0.0.1:7000', 'rediss://u:p@10.0.0.2:7001']);
  assert.equal(config.redisUrl, undefined);
  assert.throws(
    () => loadConfig({ REDIS_URL: 'redis://cache:6379', REDIS_CLUSTER_NODES: 'redis://node-1:6379' }),
    /REDIS_URL and REDIS_CLUSTER_NODES name two Redis deployments: set one/,
  );
  assert.throws(
    () => loadConfig({ REDIS_URL: 'redis://cache:6379', REDIS_TLS_CA_FILE: '/etc/ca.pem' }),
    /REDIS_TLS_CA_FILE is set, but no rediss:\/\/ URL is/,
  );
  assert.equal(loadConfig({ REDIS_URL: 'rediss://cache:6380', REDIS_TLS_CA_FILE: '/etc/ca.pem' }).redisTlsCaFile, '/etc/ca.pem');
  assert.equal(loadConfig({ REDIS_CLUSTER_NODES: 'rediss://a:1', REDIS_TLS_CA_FILE: '/etc/ca.pem' }).redisTlsCaFile, '/etc/ca.pem');
});

test('TLS_CERT and TLS_KEY come together or not at all', () => {
  for (const half of [{ TLS_CERT: '/etc/tls/cert.pem' }, { TLS_KEY: '/etc/tls/key.pem' }, { TLS_CERT: '/etc/tls/cert.pem', TLS_KEY: '' }]) {
    refuses(half, 'TLS_CERT and TLS_KEY', /must be set together \(PEM files\), or neither/);
  }
});

test('CORS_ORIGINS refuses anything but origins, naming the one that is not', () => {
  for (const bad of ['https://app.example.com/', 'ftp://files.example.com', 'app.example.com']) {
    refuses({ CORS_ORIGINS: `https://ok.example.com,${bad}` }, 'CORS_ORIGINS', new RegExp(`got "${bad.replaceAll('.', '\\.')}"$`));
  }
});

test('the per-address cap defaults to a quarter of a small total cap and must stay below it', () => {
  assert.equal(loadConfig({ MAX_CONNECTIONS: '100' }).maxConnectionsPerAddress, 25);
  assert.equal(loadConfig({ MAX_CONNECTIONS: '2' }).maxConnectionsPerAddress, 1);
  assert.equal(loadConfig({ MAX_CONNECTIONS: '0' }).maxConnectionsPerAddress, 256);
  assert.equal(loadConfig({ MAX_CONNECTIONS: '0', MAX_CONNECTIONS_PER_ADDRESS: '5000' }).maxConnectionsPerAddress, 5000);
  assert.equal(loadConfig({ MAX_CONNECTIONS: '100', MAX_CONNECTIONS_PER_ADDRESS: '0' }).maxConnectionsPerAddress, 0);
  assert.equal(
    refuses({ MAX_CONNECTIONS: '100', MAX_CONNECTIONS_PER_ADDRESS: '100' }, 'MAX_CONNECTIONS_PER_ADDRESS'),
    'MAX_CONNECTIONS_PER_ADDRESS (100) must be below MAX_CONNECTIONS (100)',
  );
});

test("the headers timeout must not exceed the request's", () => {
  assert.equal(loadConfig({ HEADERS_TIMEOUT_MS: '30000' }).headersTimeoutMs, 30_000);
  assert.equal(
    refuses({ HEADERS_TIMEOUT_MS: '30001' }, 'HEADERS_TIMEOUT_MS'),
    'HEADERS_TIMEOUT_MS (30001) must not exceed REQUEST_TIMEOUT_MS (30000)',
  );
});

test('a replaced variable is refused in words rather than ignored', () => {
  refuses({ PAGE_CACHE_SIZE: '1000' }, 'PAGE_CACHE_SIZE', /PAGE_CACHE_BYTES/);
  assert.equal(loadConfig({ PAGE_CACHE_SIZE: '' }).pageCacheBytes, 24 * 1024 * 1024, 'empty reads as unset');
});

test('a variable that looks like a setting but is not one is named, with the setting most likely meant', () => {
  const warnings = lookalikeWarnings({
    SHUTDOWN_TIMEOUT: '20000', // a unit left off
    PETSTORE_METRICS_PORT: '9464', // the service's name put in front
    DATABSE_URL: 'sqlite:x.db', // two letters swapped
    LOG_LEVLE: 'debug',
    database_url: 'sqlite:y.db', // lower case
    BAN_DURATION_MS: '60000', // another unit
    PETSTORE_SOMETHING: '1', // the service's name, nothing near it
  });
  assert.deepEqual(warnings, [
    'SHUTDOWN_TIMEOUT is set but is not a setting of this service (did you mean SHUTDOWN_TIMEOUT_MS?): it is ignored',
    'PETSTORE_METRICS_PORT is set but is not a setting of this service (did you mean METRICS_PORT?): it is ignored',
    'DATABSE_URL is set but is not a setting of this service (did you mean DATABASE_URL?): it is ignored',
    'LOG_LEVLE is set but is not a setting of this service (did you mean LOG_LEVEL?): it is ignored',
    'database_url is set but is not a setting of this service (did you mean DATABASE_URL?): it is ignored',
    'BAN_DURATION_MS is set but is not a setting of this service (did you mean BAN_DURATION_SECONDS?): it is ignored',
    'PETSTORE_SOMETHING is set but is not a setting of this service (no setting has that name): it is ignored',
  ]);
});

test("other software's variables, Kubernetes service links, the clients' and the test tools' are never taken for settings", () => {
  const env = Object.fromEntries(
    [
      ...CONFIG_VARIABLES,
      'OTEL_TRACES_SAMPLER',
      'PGHOST',
      'PGPASSWORD',
      'NODE_OPTIONS',
      'npm_config_cache',
      'UV_THREADPOOL_SIZE',
      'PETSTORE_SERVICE_HOST',
      'PETSTORE_SERVICE_PORT',
      'PETSTORE_SERVICE_PORT_HTTP',
      'PETSTORE_PORT',
      'PETSTORE_PORT_8080_TCP',
      'PETSTORE_PORT_8080_TCP_ADDR',
      'REDIS_SERVICE_HOST',
      'REDIS_PORT_6379_TCP_PORT',
      'PETSTORE_URL',
      'PETSTORE_KEY',
      'PETSTORE_TEST_POSTGRES_URL',
      'PETSTORE_MODEL_SEED',
      'PATH',
      'HOME',
      'HOSTNAME',
      'TERM',
      'LANG',
      'SHELL',
      'USER',
      'CI',
      'TZ',
      'POST',
    ].map((name) => [name, name.endsWith('_PORT') ? 'tcp://10.96.0.10:8080' : 'x']),
  );
  assert.deepEqual(lookalikeWarnings(env), []);
});
