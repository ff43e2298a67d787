/**
 * The capacity model (bench/capacity.ts): its answer moves with its inputs the way the model says, it
 * refuses inputs it cannot use, and docs/capacity.md shows exactly what it prints by default.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

const ROOT = join(import.meta.dirname, '../..');

/** The model's output; only the given CAPACITY_ variables reach it, whatever the shell running the tests has set. */
function model(args: string[] = [], capacityEnv: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('CAPACITY_')));
  const result = spawnSync(process.execPath, ['bench/capacity.ts', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...env, ...capacityEnv },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function output(args: string[] = [], capacityEnv: Record<string, string> = {}): string {
  const run = model(args, capacityEnv);
  assert.equal(run.status, 0, run.stderr);
  return run.stdout;
}

/** A cell of the sizing table, by the rate's row and the column's heading; the figure at the medians (before any bracket). */
function figure(out: string, rate: string, column: string): number {
  const rows = out.split('\n').filter((line) => line.startsWith('| '));
  const header = rows[0]!.split(' | ');
  const index = header.findIndex((heading) => heading.includes(column));
  assert.notEqual(index, -1, `no column ${column}`);
  const row = rows.find((line) => line.startsWith(`| ${rate} |`));
  assert.ok(row, `no row for ${rate} requests/s`);
  return Number(row.split(' | ')[index]!.split(' ')[0]!.replace(/,/g, ''));
}

test('doubling the service CPU per request about doubles the instances', () => {
  const base = output();
  const doubled = output(['--cpu-scale=2']);
  for (const rate of ['100,000', '1,000,000']) {
    const ratio = figure(doubled, rate, 'Instances') / figure(base, rate, 'Instances');
    assert.ok(ratio > 1.9 && ratio < 2.15, `${rate}: instances × ${ratio}`);
  }
});

test('a write-heavier mix raises PostgreSQL commits in proportion to its creates', () => {
  const base = output();
  const writeHeavy = output(['--mix=list:0.45,get:0.25,create:0.30']);
  for (const rate of ['10,000', '1,000,000']) {
    assert.equal(figure(writeHeavy, rate, 'commits/s'), 3 * figure(base, rate, 'commits/s'));
    assert.ok(figure(writeHeavy, rate, 'PostgreSQL cores') > figure(base, rate, 'PostgreSQL cores'));
  }
});

test('sending each key to one instance keeps the key cache working as instances are added', () => {
  const spread = output();
  const affine = output(['--key-affinity=1']);
  assert.ok(figure(affine, '1,000,000', 'Key cache misses') < figure(spread, '1,000,000', 'Key cache misses'));
  assert.ok(figure(affine, '1,000,000', 'PostgreSQL statements/s') < figure(spread, '1,000,000', 'PostgreSQL statements/s'));
  // Spread over more instances, each sees fewer requests of a key: the misses grow with the rate.
  assert.ok(figure(spread, '1,000', 'Key cache misses') < figure(spread, '100,000', 'Key cache misses'));
});

test('an input set in the environment counts as on the command line, which wins', () => {
  assert.equal(output([], { CAPACITY_CPU_SCALE: '2' }), output(['--cpu-scale=2']));
  assert.equal(output(['--cpu-scale=1'], { CAPACITY_CPU_SCALE: '2' }), output());
  assert.equal(output(['--rates=5000']).match(/^\| 5,000 \|/gm)?.length, 2); // one row in each table
});

test('an unknown input, a value that is not a number or a mix that does not add up to 1 is refused', () => {
  for (const args of [['--no-such-input=1'], ['--cpu-scale=fast'], ['--mix=list:0.5,get:0.25,create:0.1'], ['--mix=list:0.9,get:0.1']]) {
    const run = model(args);
    assert.equal(run.status, 2, args.join(' '));
    assert.match(run.stderr, /^capacity: /);
  }
});

test('docs/capacity.md shows the model’s default output exactly', () => {
  const doc = readFileSync(join(ROOT, 'docs/capacity.md'), 'utf8');
  const shown = /<!-- capacity: begin -->\n([\s\S]*?)\n<!-- capacity: end -->/.exec(doc)?.[1];
  assert.ok(shown !== undefined, 'docs/capacity.md has no block between <!-- capacity: begin --> and <!-- capacity: end -->');
  assert.equal(shown, output().trimEnd(), 'run `node bench/capacity.ts` and paste its output into docs/capacity.md');
});
