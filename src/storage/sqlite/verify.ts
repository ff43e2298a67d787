/**
 * `petstore backup --verify FILE`: what restore would check of a backup, without restoring it or
 * writing anything: its checksum (checksum.ts), SQLite's integrity check, a schema version this
 * release can restore, a -wal beside it; and what it is: the environment it belongs to, its pets
 * and keys. The file is opened read-only.
 */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { checksumPath, readChecksum, sha256Of } from './checksum.ts';
import { DatabaseSync, type Database } from './driver.ts';
import { LATEST_SQLITE_VERSION } from './migrations.ts';
import { summarise, type DatabaseSummary } from './summary.ts';

export interface Finding {
  check: 'checksum' | 'integrity' | 'schema' | 'environment';
  ok: boolean;
  says: string;
}

export interface Verification {
  file: string;
  findings: Finding[];
  /** What it holds, when it could be read. */
  summary: DatabaseSummary | undefined;
}

function checksumFinding(file: string): Finding {
  const sidecar = checksumPath(file);
  let expected: string | undefined;
  try {
    expected = readChecksum(file);
  } catch (err) {
    return { check: 'checksum', ok: false, says: (err as Error).message };
  }
  if (expected === undefined)
    return { check: 'checksum', ok: false, says: `none: there is no ${sidecar}, so a change to its bytes cannot be seen` };
  const digest = sha256Of(file);
  if (digest !== expected)
    return { check: 'checksum', ok: false, says: `CHANGED: its SHA-256 is ${digest}, not the ${expected} that ${sidecar} records` };
  return { check: 'checksum', ok: true, says: `SHA-256 ${digest}, as ${sidecar} records` };
}

function integrityFinding(db: Database): Finding {
  const problems = (db.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[]).map((row) => row.integrity_check);
  if (problems[0] === 'ok') return { check: 'integrity', ok: true, says: "ok (SQLite's integrity_check)" };
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : '';
  return { check: 'integrity', ok: false, says: `FAILED: ${problems[0]}${more}` };
}

/** Checks the backup at path; throws only when there is no file there. */
export function verifyBackup(path: string): Verification {
  const file = resolve(path);
  if (!statSync(file, { throwIfNoEntry: false })?.isFile()) throw new Error(`there is no backup file at ${file}`);
  const findings = [checksumFinding(file)];
  if ((statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0) > 0) {
    findings.push({
      check: 'integrity',
      ok: false,
      says: `${file}-wal beside it may hold commits the file lacks: it is not a backup made by petstore backup`,
    });
  }
  let summary: DatabaseSummary | undefined;
  let db: Database | undefined;
  let stage: Finding['check'] = 'integrity';
  try {
    db = new DatabaseSync(file, { readOnly: true });
    const integrity = integrityFinding(db);
    findings.push(integrity);
    stage = 'schema'; // sound, but perhaps not the service's (summary.ts names why)
    if (integrity.ok) summary = summarise(db, file);
  } catch (err) {
    findings.push({ check: stage, ok: false, says: `FAILED: ${(err as Error).message}` });
  } finally {
    db?.close();
  }
  if (summary !== undefined) {
    const release = `this release's is ${LATEST_SQLITE_VERSION}`;
    const older = 'an older one is migrated by petstore migrate, or the next start unless MIGRATIONS=refuse';
    findings.push(
      summary.schemaVersion > LATEST_SQLITE_VERSION
        ? { check: 'schema', ok: false, says: `version ${summary.schemaVersion}, NEWER than this release can restore (${release})` }
        : { check: 'schema', ok: true, says: `version ${summary.schemaVersion} (${release}; ${older})` },
      { check: 'environment', ok: true, says: `${summary.environment.environment ?? 'not known'} (${summary.environment.basis})` },
    );
  }
  return { file, findings, summary };
}
