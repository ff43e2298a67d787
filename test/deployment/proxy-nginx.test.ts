/**
 * The documented proxy setup, for real: Debian's nginx with deploy/nginx.conf (only its addresses
 * changed) in front of a service process started with TRUST_PROXY=1, as compose.yaml and the README
 * set it. Clients connect to nginx from distinct loopback addresses (127.0.0.2, 127.0.0.3, ...):
 *  - each gets its own keyless rate-limit bucket;
 *  - a client cannot choose its bucket (or its logged address) by sending its own X-Forwarded-For;
 *  - the log line of each request shows the address of the client that sent it.
 * Skipped, loudly, where nginx is not installed; under CI=true that is a failure.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { NGINX_MISSING, startNginx, type RunningNginx } from '../support/nginx.ts';
import { startServerProcess, type ServerProcess } from '../support/processes.ts';
import { request } from '../support/raw-http.ts';
import { atEnd, suiteOwner, tempDir } from '../support/temp.ts';
import { toolMissing } from '../support/tools.ts';

const ANONYMOUS_LIMIT = 5;

/** One request to nginx from the given local address, on its own connection. */
const from = (localAddress: string, port: number, path: string, headers: Record<string, string> = {}) =>
  request(`http://127.0.0.1:${port}${path}`, { headers, localAddress });

/** Fixed minute windows: a burst that straddles a minute boundary would start a new window midway. */
async function awayFromMinuteBoundary(): Promise<void> {
  const second = new Date().getUTCSeconds();
  if (second >= 50) await sleep((61 - second) * 1000);
}

describe('behind nginx with deploy/nginx.conf and TRUST_PROXY=1', { skip: toolMissing('the proxy test', NGINX_MISSING) }, () => {
  let service: ServerProcess;
  let nginx: RunningNginx;
  let port: number;
  // Undone in reverse: nginx, the service, then the folder they share.
  const suite = suiteOwner();

  before(async () => {
    const dir = tempDir(suite);
    service = await startServerProcess(
      {
        DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`,
        TRUST_PROXY: '1',
        LOG_LEVEL: 'info',
        ANONYMOUS_RATE_LIMIT_PER_MINUTE: String(ANONYMOUS_LIMIT),
      },
      { owner: suite },
    );
    nginx = await startNginx(dir, [Number(new URL(service.url).port)]);
    atEnd(suite, () => nginx.stop());
    port = nginx.port;
    await awayFromMinuteBoundary();
  });

  test('each client address gets its own keyless bucket', async () => {
    const first: number[] = [];
    for (let i = 0; i <= ANONYMOUS_LIMIT; i++) first.push((await from('127.0.0.2', port, '/v1/pets')).status);
    assert.deepEqual(first, [...Array(ANONYMOUS_LIMIT).fill(401), 429], '127.0.0.2 spends its own bucket');
    const other = await from('127.0.0.3', port, '/v1/pets');
    assert.equal(other.status, 401, '127.0.0.3 is not refused for what 127.0.0.2 did');
    assert.equal(other.headers['x-ratelimit-remaining'], String(ANONYMOUS_LIMIT - 1));
  });

  test("a client's own X-Forwarded-For chooses neither its bucket nor its address", async () => {
    // 127.0.0.2's bucket is spent (above); naming it does not put 127.0.0.4 in it.
    const borrowed = await from('127.0.0.4', port, '/v1/pets', { 'x-forwarded-for': '127.0.0.2' });
    assert.equal(borrowed.status, 401);
    assert.equal(borrowed.headers['x-ratelimit-remaining'], String(ANONYMOUS_LIMIT - 1));
    // A new address in every request does not give 127.0.0.4 a new bucket each time.
    const statuses: number[] = [];
    for (let i = 0; i < ANONYMOUS_LIMIT; i++) {
      statuses.push(
        (await from('127.0.0.4', port, '/v1/pets', { 'x-forwarded-for': `10.0.0.${i}, not-an-address, ::ffff:8.8.8.${i}` })).status,
      );
    }
    assert.deepEqual(statuses, [...Array(ANONYMOUS_LIMIT - 1).fill(401), 429]);
  });

  test('the log shows each client its own address', async () => {
    const sent: [requestId: string, address: string][] = [];
    for (const address of ['127.0.0.5', '127.0.0.6', '127.0.0.7']) {
      const requestId = `nginx-test-${address}`;
      await from(address, port, '/v1/pets', { 'x-request-id': requestId, 'x-forwarded-for': '203.0.113.9' });
      sent.push([requestId, address]);
    }
    await sleep(100); // the log line is written as the answer finishes
    const lines = service
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"'))
      .map((l) => JSON.parse(l) as { requestId: string; client: string });
    for (const [requestId, address] of sent) {
      assert.equal(lines.find((l) => l.requestId === requestId)?.client, address, requestId);
    }
    assert.ok(!lines.some((l) => l.client === '203.0.113.9'), 'no client-written address reaches the log');
    assert.ok(
      !lines.some((l) => l.requestId?.startsWith('nginx-test-') && l.client === '127.0.0.1'),
      "no request is logged with the proxy's address",
    );
  });

  test('/metrics is not reachable through the proxy', async () => {
    assert.equal((await from('127.0.0.2', port, '/metrics')).status, 403);
  });
});
