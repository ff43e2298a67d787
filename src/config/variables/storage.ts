/**
 * Configuration (src/config.ts): How SQLite commits and waits for its write lock, and how migrations
 * are applied and waited for.
 */
import { variable, Schema } from '../variable.ts';
import { DEFAULT_STATEMENT_TIMEOUT_MS, MIGRATION_MODES } from '../../storage/migration-mode.ts';
import { DEFAULT_MIGRATION_WAIT_MS } from '../../storage/migration-wait.ts';

export const STORAGE_VARIABLES = [
  variable({
    env: 'SQLITE_SYNCHRONOUS',
    field: 'sqliteSynchronous',
    schema: Schema.Enum(['normal', 'full'] as const),
    default: 'normal',
    description: '`full` flushes every commit to disk, so nothing acknowledged is lost even on power loss; see Durability.',
    app: false,
  }),
  variable({
    env: 'SQLITE_LOCK_WAIT_MS',
    field: 'sqliteLockWaitMs',
    schema: Schema.Integer({ minimum: 0, maximum: 60_000 }),
    default: 2000,
    description:
      'How long a SQLite write waits, off the event loop, for a lock another process holds before it is answered 503 with Retry-After.',
    app: false,
  }),
  variable({
    env: 'MIGRATION_LOCK_WAIT_MS',
    field: 'migrationLockWaitMs',
    schema: Schema.Integer({ minimum: 0, maximum: 3_600_000 }),
    default: DEFAULT_MIGRATION_WAIT_MS,
    description:
      'How long `petstore serve`, or a `petstore` command that opens the database, waits for the migration lock while another ' +
      "process holds it (another instance applying migrations, an operator's session; on SQLite the write lock) before it " +
      'exits with a message naming the lock (300000: 5 minutes; 0: no wait). The wait is logged once. ' +
      'See "Migrations" in docs/operations.md.',
    app: false,
  }),
  variable({
    env: 'MIGRATIONS',
    field: 'migrations',
    schema: Schema.Enum(MIGRATION_MODES),
    default: 'apply',
    description:
      'What `petstore serve` and the `keys` commands do with a database that lacks migrations of this release: `apply` them ' +
      '(under the migration lock), or `refuse` to start, with exit status 1 and one line naming its version, the version needed ' +
      'and `petstore migrate`, which applies them whatever this says. A database ahead of the release is opened either way. ' +
      'See "Rollout order" in docs/operations.md.',
    app: false,
  }),
  variable({
    env: 'MIGRATION_STATEMENT_TIMEOUT_MS',
    field: 'migrationStatementTimeoutMs',
    schema: Schema.Integer({ minimum: 0, maximum: 86_400_000 }),
    default: DEFAULT_STATEMENT_TIMEOUT_MS,
    description:
      "PostgreSQL: the bound on each migration statement, waiting for a table's lock included (300000: 5 minutes; 0: none), " +
      "in place of the 2 s of the service's own statements; past it the migration is rolled back and the start or " +
      '`petstore migrate` exits 1 naming this setting. SQLite has none: a migration holds the write lock and waits for nothing else.',
    app: false,
  }),
  variable({
    env: 'BACKUP_DIR',
    field: 'backupDir',
    schema: Schema.String(),
    accepts: 'a folder',
    default: undefined,
    description:
      'SQLite: the folder `petstore backup --into` writes dated backups to (the shipped backup timer). When set, `/metrics` ' +
      'reports when the newest complete one began (`petstore_backup_last_success_timestamp_seconds`, 0 while there is none), ' +
      'for the PetstoreBackupStale alert. See "Backups" in docs/operations.md.',
    app: false,
  }),
] as const;
