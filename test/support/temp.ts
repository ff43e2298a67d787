/**
 * What a test makes outside itself (folders, PostgreSQL databases, Redis keys, processes) is undone
 * when its owner ends: a test (its context `t`) or a suite (`suiteOwner()`, called in the describe
 * body). The steps run in the reverse order of their making (a server stops before its folder goes),
 * each one even when a step before it failed, whether the test passed, failed, timed out or was
 * skipped. Folders and processes also go when the test process exits or is stopped by a signal
 * while they remain: an interrupted run, a hook that never finished, or a body still running after
 * its test timed out (opening a SQLite store makes its folder again).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';

/** A test's context, or anything else whose `after` runs a function when it ends. */
export interface Owner {
  after(fn: () => unknown): unknown;
}

/** One thing to undo; it may return a promise. */
export type Step = () => unknown;

interface Undo {
  steps: Step[];
  ended: boolean;
}

const undos = new WeakMap<Owner, Undo>();

/**
 * Runs the steps, taking them off the list last first, each whatever the others did; then throws
 * what failed (all of it, in an AggregateError, when more than one step did).
 */
export async function undoAll(steps: Step[]): Promise<void> {
  const failures: unknown[] = [];
  for (let step = steps.pop(); step; step = steps.pop()) {
    try {
      await step();
    } catch (err) {
      failures.push(err);
    }
  }
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, `${failures.length} cleanup steps failed`);
}

async function end(undo: Undo): Promise<void> {
  try {
    await undoAll(undo.steps);
  } finally {
    undo.ended = true;
  }
}

/**
 * Runs `step` when the owner ends, before the steps registered earlier. An owner that has already
 * ended (a body still running after its test timed out) has the step run at once.
 */
export function atEnd(owner: Owner, step: Step): void {
  let undo = undos.get(owner);
  if (!undo) {
    const created: Undo = { steps: [], ended: false };
    undos.set(owner, created);
    owner.after(() => end(created));
    undo = created;
  }
  if (!undo.ended) {
    undo.steps.push(step);
    return;
  }
  void (async () => step())().catch((err: unknown) => console.error('# cleanup after the end of its test failed:', err));
}

/**
 * The owner of what a describe block's hooks make, undone by the block's own `after` hook. Call it in
 * the describe body itself: node:test ties an `after` hook to its block only there.
 */
export function suiteOwner(): Owner {
  const undo: Undo = { steps: [], ended: false };
  after(() => end(undo));
  const owner: Owner = {
    after() {
      throw new Error('a suite owner ends with its describe block');
    },
  };
  undos.set(owner, undo);
  return owner;
}

// The last resort: what is still there when the process ends. Folders stay listed after their
// removal, since a late command can make one again.
const folders = new Set<string>();
const children = new Set<ChildProcess>();
const groups = new Set<number>();

function removeWhatRemains(): void {
  for (const child of children) child.kill('SIGKILL');
  for (const group of groups) killGroup(group);
  for (const dir of folders) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      console.error(`# could not remove ${dir}: ${(err as Error).message}`);
    }
  }
}

process.once('exit', removeWhatRemains);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    removeWhatRemains();
    // Die of the signal as if unhandled, unless something else (the test runner) handles it.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  });
}

/** Kills the process (SIGKILL) if it is still running when the test process ends. */
export function killAtExit(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/**
 * SIGKILL to every process of a group; none left is no error. The group is then no longer killed at
 * exit: its number could by then be a new group's.
 */
export function killGroup(pgid: number): void {
  groups.delete(pgid);
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/** Kills every process of the group (SIGKILL) still running when the test process ends. */
export function killGroupAtExit(pgid: number): void {
  groups.add(pgid);
}

/**
 * A new, empty directory under the system's temporary one, removed when the owner ends (after what
 * the owner made later, such as a server using it). Without an owner (a script) the caller removes
 * it; either way it is removed when the process exits.
 */
export function tempDir(owner?: Owner): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-test-'));
  folders.add(dir);
  if (owner) atEnd(owner, () => rmSync(dir, { recursive: true, force: true, maxRetries: 3 }));
  return dir;
}
