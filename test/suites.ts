/**
 * Which test files run on which engine, by name: scripts/run-tests.ts runs them from these lists, and
 * refuses to run when a file under test/ is in none of them or a listed file does not exist, so a
 * renamed or added file can never silently stop running (test/suites.test.ts checks the same).
 */

/** The HTTP behaviour, run on SQLite with the in-process limiter and again on PostgreSQL + Redis. */
export const ON_EVERY_ENGINE = [
  'hardened-edges.test.ts',
  'http-answers-before-keys.test.ts',
  'http-auth-cost.test.ts',
  'http-auth.test.ts',
  'http-cache-budgets.test.ts',
  'http-compression.test.ts',
  'http-conditional.test.ts',
  'http-contract-conformance.test.ts',
  'http-deprecation.test.ts',
  'http-docs.test.ts',
  'http-errors.test.ts',
  'http-idempotency.test.ts',
  'http-key-lifecycle.test.ts',
  'http-operations.test.ts',
  'http-pets.test.ts',
  'http-properties.test.ts',
  'http-public-base-url.test.ts',
  'openapi.test.ts',
  'rate-limits.test.ts',
];

/** Several instances sharing PostgreSQL and Redis (one, or a cluster of the test's own), and their outages: only where both are given. */
export const ON_POSTGRES_AND_REDIS = [
  'rolling-restart-nginx.test.ts',
  'scale-out-cluster.test.ts',
  'scale-out-instances.test.ts',
  'scale-out-outages.test.ts',
  'scale-out-quota-blocks.test.ts',
  'scale-out-redis-faults.test.ts',
];

/**
 * Run once more through PgBouncer in transaction pooling mode (scripts/run-tests.ts), with the HTTP
 * suites and the two above: the files of ONCE whose PostgreSQL parts a transaction pooler could break
 * (migrations at a concurrent start, every store operation, idempotent creates held up by a lock).
 */
export const ALSO_THROUGH_PGBOUNCER = ['idempotent-creates.test.ts', 'migrations.test.ts', 'storage-contract.test.ts'];

/**
 * Run once, in the SQLite pass. Those that also cover PostgreSQL (the storage contract, migrations,
 * idempotent creates, durability, shutdown, secrets) start it themselves when PETSTORE_TEST_POSTGRES_URL
 * is set.
 */
export const ONCE = [
  'capacity-model.test.ts',
  'cli.test.ts',
  'client-address.test.ts',
  'client.test.ts',
  'config.test.ts',
  'create-stalls.test.ts',
  'deployment-files.test.ts',
  'docs-browser.test.ts',
  'domain.test.ts',
  'durability.test.ts',
  'examples.test.ts',
  'generated-clients.test.ts',
  'group-commit.test.ts',
  'idempotent-creates.test.ts',
  'limits.test.ts',
  'migrations.test.ts',
  'page-cache.test.ts',
  'plugin-order.test.ts',
  'proxy-nginx.test.ts',
  'redis-managed.test.ts',
  'sdk-browser.test.ts',
  'sdk-package.test.ts',
  'secrets-never-leak.test.ts',
  'shutdown.test.ts',
  'slow-clients.test.ts',
  'startup.test.ts',
  'storage-contract.test.ts',
  'storage-faults.test.ts',
  'suites.test.ts',
  'tls.test.ts',
  'tracing.test.ts',
  'ttl-cache.test.ts',
  'unkind-timing.test.ts',
];

/** Problems with the lists against the files present: each file in exactly one list, each listed file present. */
export function listProblems(present: readonly string[]): string[] {
  const listed = [...ON_EVERY_ENGINE, ...ON_POSTGRES_AND_REDIS, ...ONCE];
  const problems: string[] = [];
  for (const file of present) {
    const times = listed.filter((f) => f === file).length;
    if (times !== 1) problems.push(`${file} is in ${times} lists of test/suites.ts, not one`);
  }
  for (const file of listed) if (!present.includes(file)) problems.push(`test/suites.ts lists ${file}, which does not exist`);
  for (const file of ALSO_THROUGH_PGBOUNCER)
    if (!ONCE.includes(file)) problems.push(`ALSO_THROUGH_PGBOUNCER lists ${file}, which is not in ONCE`);
  return problems;
}
