/**
 * What the process runs out of, as gauges the alerts compare (deploy/prometheus/alerts.yml): the memory it
 * may use, the embedded database's files and the room left on their file system, the newest backup, and
 * when the TLS certificate in use expires. Each is read at the scrape, so it is never older than the scrape.
 */
import { realpath, stat, statfs } from 'node:fs/promises';
import { totalmem } from 'node:os';
import { dirname } from 'node:path';
import { Gauge, type Registry } from 'prom-client';
import { newestDatedBackup } from './storage/sqlite/backup-folder.ts';

/**
 * A gauge of one value for the whole process, which each of its workers reports alike: the process's /metrics
 * (workers/process-metrics.ts) takes the highest, rather than adding them up.
 */
export const PROCESS_WIDE = { aggregator: 'max' } as const;

/** The embedded database's files, and the folder of dated backups when BACKUP_DIR names one. */
export interface WatchedFiles {
  database: string;
  backupDir: string | undefined;
}

/**
 * The memory the process may use: its cgroup's limit (a container's, a systemd unit's MemoryMax=) when
 * there is one, else the machine's. Node reports "no limit" as the largest 64-bit value.
 */
export function memoryLimitBytes(): number {
  const constrained = process.constrainedMemory();
  const machine = totalmem();
  return constrained > 0 && constrained < machine ? constrained : machine;
}

/** A file's size in bytes, 0 when it does not exist (the -wal between a checkpoint that removed it and the next write). */
async function sizeOf(path: string): Promise<number> {
  return (await stat(path).catch(() => undefined))?.size ?? 0;
}

/**
 * The gauges of the embedded database's files, registered only for SQLite: an unlabelled gauge reads 0
 * until set, and a free space of 0 on a PostgreSQL instance would page.
 */
/** What a scrape reports of the database's files: their sizes, and their file system's room (undefined if statfs failed). */
interface FilesReading {
  database: number;
  wal: number;
  fileSystem: { available: number; size: number } | undefined;
}

/** Reads the files once: through a link, SQLite keeps the -wal beside the file it leads to, on that file's volume. */
async function readFiles(path: string): Promise<FilesReading> {
  const database = await realpath(path).catch(() => path);
  const [main, wal, fileSystem] = await Promise.all([
    sizeOf(database),
    sizeOf(`${database}-wal`),
    statfs(dirname(database)).then(
      (s) => ({ available: s.bavail * s.bsize, size: s.blocks * s.bsize }),
      () => undefined,
    ),
  ]);
  return { database: main, wal, fileSystem };
}

function watchFiles(registry: Registry, files: WatchedFiles): void {
  // The three gauges are collected together at each scrape: they share one reading while it is under way.
  let reading: Promise<FilesReading> | undefined;
  const read = () =>
    (reading ??= readFiles(files.database).finally(() => {
      reading = undefined;
    }));
  new Gauge({
    name: 'petstore_sqlite_file_bytes',
    ...PROCESS_WIDE,
    help: 'Size of the embedded SQLite database\'s files: "database" (the main file) and "wal" (its write-ahead log).',
    labelNames: ['file'] as const,
    registers: [registry],
    async collect() {
      const { database, wal } = await read();
      this.set({ file: 'database' }, database);
      this.set({ file: 'wal' }, wal);
    },
  });
  new Gauge({
    name: 'petstore_sqlite_filesystem_available_bytes',
    ...PROCESS_WIDE,
    help: "Bytes the service's user may still write on the file system that holds the SQLite database and its WAL.",
    registers: [registry],
    async collect() {
      const { fileSystem } = await read();
      if (fileSystem) this.set(fileSystem.available);
    },
  });
  new Gauge({
    name: 'petstore_sqlite_filesystem_size_bytes',
    ...PROCESS_WIDE,
    help: 'Size of the file system that holds the SQLite database and its WAL.',
    registers: [registry],
    async collect() {
      const { fileSystem } = await read();
      if (fileSystem) this.set(fileSystem.size);
    },
  });
  const backupDir = files.backupDir;
  if (backupDir === undefined) return;
  new Gauge({
    name: 'petstore_backup_last_success_timestamp_seconds',
    ...PROCESS_WIDE,
    help:
      'When the newest complete backup in BACKUP_DIR began (Unix seconds, from its name petstore-YYYYMMDDTHHMMSSZ.db); ' +
      '0 while there is none. Reported only when BACKUP_DIR is set.',
    registers: [registry],
    async collect() {
      this.set((await newestDatedBackup(backupDir)) / 1000);
    },
  });
}

export function resourceMetrics(registry: Registry) {
  new Gauge({
    name: 'petstore_memory_limit_bytes',
    ...PROCESS_WIDE,
    help: "Memory the process may use: its cgroup's limit (a container's or a systemd unit's MemoryMax=), else the machine's.",
    registers: [registry],
    collect() {
      this.set(memoryLimitBytes());
    },
  });
  let tlsExpiry: Gauge | undefined;
  return {
    /** Reports the SQLite files' sizes, their file system's room and, with BACKUP_DIR, the newest backup (SQLite only). */
    watchFiles: (files: WatchedFiles) => watchFiles(registry, files),
    /** The certificate in use ends at validTo (at start and after each reload); only a TLS server reports it. */
    tlsCertificateInUse(validTo: Date) {
      tlsExpiry ??= new Gauge({
        name: 'petstore_tls_certificate_expiry_timestamp_seconds',
        ...PROCESS_WIDE,
        help: 'When the TLS certificate in use stops being valid (its notAfter, Unix seconds); only when the server listens with TLS.',
        registers: [registry],
      });
      tlsExpiry.set(validTo.getTime() / 1000);
    },
  };
}
