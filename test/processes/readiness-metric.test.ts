/**
 * The petstore_ready gauge of a server process on SQLite, read both ways /metrics is served (the private
 * listener, METRICS_PORT, and the public one with METRICS_TOKEN), with nothing polling /readyz meanwhile:
 * 1 when healthy; 0 once a write failed while another process holds the write lock, and 1 again once it
 * lets go, seen by scrapes alone; 0 while the server drains after SIGTERM. In each state /readyz, asked
 * after the scrapes, agrees with them. (On PostgreSQL cut off, the gauge is 0 within the check's bound:
 * test/scale-out/outages.test.ts.)
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { holdSqliteWriteLock } from '../support/lock-holders.ts';
import { freePort, killServer, startServerProcess, unlimitedKey, type ServerProcess } from '../support/processes.ts';
import { suiteOwner, tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

const TOKEN = 'metrics-token-0123456789';

describe('petstore_ready', () => {
  const suite = suiteOwner();
  let file: string;
  let server: ServerProcess;
  let key: string;
  let privateUrl: string;

  /** petstore_ready as one scrape reads it. */
  const readyIn = async (url: string, headers: Record<string, string> = {}): Promise<number> => {
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(15_000) });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const sample = /^petstore_ready (\S+)$/m.exec(text);
    assert.ok(sample, `petstore_ready in the scrape of ${url}:\n${text}`);
    return Number(sample[1]);
  };
  /** The gauge on the private listener, then on the public one with the token. */
  const scrapes = async () => [await readyIn(privateUrl), await readyIn(`${server.url}/metrics`, { authorization: `Bearer ${TOKEN}` })];
  const readyz = async () => {
    const res = await fetch(`${server.url}/readyz`, { signal: AbortSignal.timeout(15_000) });
    return { status: res.status, body: (await res.json()) as { message?: string } };
  };

  before(async () => {
    file = join(tempDir(suite), 'petstore.db');
    const metricsPort = await freePort();
    const env = {
      DATABASE_URL: `sqlite:${file}`,
      METRICS_PORT: String(metricsPort),
      METRICS_TOKEN: TOKEN,
      // A create waiting for another process's lock is refused soon.
      SQLITE_LOCK_WAIT_MS: '300',
      // A drain far longer than the test takes to read it; the process is killed after.
      SHUTDOWN_DRAIN_MS: '30000',
      SHUTDOWN_TIMEOUT_MS: '35000',
    };
    key = await unlimitedKey(env);
    server = await startServerProcess(env, { owner: suite });
    privateUrl = `http://127.0.0.1:${metricsPort}/metrics`;
  });

  test('1 on both listeners while storage answers and the server is not draining', async () => {
    assert.deepEqual(await scrapes(), [1, 1]);
    assert.equal((await readyz()).status, 200);
  });

  test('0 once a write failed under another process holding the write lock, as /readyz says; 1 again once it lets go, with only scrapes asking', async (t) => {
    const lock = await holdSqliteWriteLock(t, file);
    const create = await fetch(`${server.url}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'refused', categoryId: 1 }),
    });
    assert.equal(create.status, 503, await create.text());
    assert.deepEqual(await scrapes(), [0, 0]);
    const answer = await readyz();
    assert.equal(answer.status, 503);
    assert.match(answer.body.message ?? '', /locked by another process/);
    assert.deepEqual(await scrapes(), [0, 0], 'still 0 while the lock is held');

    await lock.release();
    // Each scrape's check tries one write while writes fail, as /readyz does: nothing else asks.
    await eventually(async () => (await scrapes()).every((v) => v === 1), 5000);
    assert.match(server.output(), /storage writes recovered/);
    assert.equal((await readyz()).status, 200);
  });

  test('0 on both listeners while the server drains after SIGTERM', async () => {
    server.child.kill('SIGTERM');
    // The signal is handled a moment later; the drain then lasts far longer than this wait.
    await eventually(async () => (await scrapes()).every((v) => v === 0), 10_000, 50);
    assert.equal(server.child.exitCode, null, 'still draining');
    const answer = await readyz();
    assert.equal(answer.status, 503);
    assert.equal(answer.body.message, 'Shutting down');
    await killServer(server);
  });
});
