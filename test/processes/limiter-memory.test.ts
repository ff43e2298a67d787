/**
 * RATE_LIMIT_MEMORY_BYTES through a real server (docs/rate-limits.md, "Memory"): the in-process limiter counts
 * as many clients as its table holds; the next new one is answered 503 with Retry-After, while every client
 * already counted keeps its window, none forgotten to make room.
 */
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { test } from 'node:test';
import { SharedTable } from '../../src/limits/shared-table.ts';
import { RECORD_FIELDS } from '../../src/limits/subject-records.ts';
import { startServerProcess } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';

const BYTES = 1024 * 1024;

/** A GET of /v1/pets without a key, as the client `address` behind the trusted proxy; its status and headers. */
function anonymous(
  url: string,
  agent: Agent,
  address: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/pets`, { agent, headers: { 'X-Forwarded-For': address } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject).end();
  });
}

/** The n-th of many distinct client addresses. */
const addressOf = (n: number) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;

test('a limiter with no room for a new client answers it 503 with Retry-After, and keeps counting every client it holds', async (t) => {
  const dir = tempDir(t);
  const server = await startServerProcess(
    {
      DATABASE_URL: `sqlite:${dir}/petstore.db`,
      RATE_LIMIT_MEMORY_BYTES: String(BYTES),
      TRUST_PROXY: '1',
      ANONYMOUS_RATE_LIMIT_PER_MINUTE: '3',
    },
    { owner: t },
  );
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  t.after(() => agent.destroy());
  const room = SharedTable.recordsFor(BYTES, RECORD_FIELDS);
  // Each address without a key is one client of the limiter: 401, counted in its own minute.
  for (let n = 0; n < room; n += 64) {
    const batch = Array.from({ length: Math.min(64, room - n) }, (_, i) => anonymous(server.url, agent, addressOf(n + i)));
    for (const answer of await Promise.all(batch)) assert.equal(answer.status, 401);
  }
  const refused = await anonymous(server.url, agent, addressOf(room));
  assert.equal(refused.status, 503);
  assert.equal(refused.headers['retry-after'], '60');
  assert.equal((JSON.parse(refused.body) as { code: string }).code, 'unavailable');
  // A client already counted is served, from its own window: two more of its three, then 429.
  const counted = [];
  for (let i = 0; i < 3; i++) counted.push((await anonymous(server.url, agent, addressOf(0))).status);
  assert.deepEqual(counted, [401, 401, 429]);
  assert.match(server.output(), /"msg":"rate limiter full"/);
});
