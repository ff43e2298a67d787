/**
 * Secrets never leave the process: a real server at LOG_LEVEL=debug, driven through every operation
 * with good, wrong, expired and revoked keys and error cases, never writes a full API key, a key's
 * hash or the database password to its log, to any response (body or header) or to /metrics. On
 * SQLite, and on PostgreSQL with a password in DATABASE_URL.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { createTestDatabase, requirePostgres } from '../support/engines.ts';
import { keysCreateJson, lastLine, runCli, startServerProcess } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';

const PASSWORD = 'S3cretPassw0rd-never-shown';

async function checkNothingLeaks(t: TestContext, databaseUrl: string, secrets: string[]): Promise<void> {
  const metricsToken = `metrics-${randomBytes(12).toString('hex')}`;
  const env = { DATABASE_URL: databaseUrl, LOG_LEVEL: 'debug', METRICS_TOKEN: metricsToken };
  const good = await keysCreateJson(env, '--plan', 'free');
  const revoked = await keysCreateJson(env, '--plan', 'pro');
  const expired = await keysCreateJson(env, '--plan', 'pro');
  const rotated = await keysCreateJson(env, '--plan', 'pro');
  assert.equal((await runCli(['keys', 'revoke', revoked.id], env)).code, 0);
  assert.equal((await runCli(['keys', 'expire', expired.id, '--at', '2020-01-01T00:00:00Z', '--force'], env)).code, 0);
  const rotation = await runCli(['keys', 'rotate', rotated.id, '--json'], env);
  const replacement = JSON.parse(lastLine(rotation.stdout)).key as string;
  const keys = [good.key, revoked.key, expired.key, rotated.key, replacement];
  const wrong = good.key.slice(0, -2) + 'zz';
  const forbidden = [
    ...secrets,
    metricsToken,
    ...keys,
    wrong,
    ...[...keys, wrong].map((k) => createHash('sha256').update(k).digest('hex')),
  ];

  const server = await startServerProcess(env, { owner: t });
  const seen: string[] = [];
  const send = async (method: string, path: string, key?: string, body?: string) => {
    const headers: Record<string, string> = {};
    if (key) headers.authorization = `Bearer ${key}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(server.url + path, { method, headers, body });
    seen.push(`${res.status} ${[...res.headers].map(([h, v]) => `${h}: ${v}`).join('\n')}\n${await res.text()}`);
  };
  try {
    for (const key of [...keys, wrong, undefined, 'garbage']) {
      await send('GET', '/v1/pets?limit=5', key);
      await send('POST', '/v1/pets', key, JSON.stringify({ name: 'Leak check', categoryId: 1 }));
      await send('POST', '/v1/pets', key, '{"name":');
      await send('GET', '/v1/pets/1', key);
      await send('GET', '/v1/pets/abc', key);
      await send('GET', '/v1/pets?cursor=forged', key);
      await send('DELETE', '/v1/pets/1', key);
    }
    await send('GET', '/metrics', metricsToken);
    await send('GET', '/readyz');
    await send('GET', '/v1/openapi.json');
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
  }
  const everything = [server.output(), ...seen].join('\n');
  for (const secret of forbidden) assert.ok(!everything.includes(secret), `a secret appeared: ${secret.slice(0, 12)}…`);
  assert.match(server.output(), /"level":20|"level":30/, 'the debug log was written');
  assert.match(seen.join('\n'), /petstore_http_requests_total/, 'the metrics were read');
}

test('SQLite: no key, key hash or secret in logs, answers or metrics', async (t) => {
  await checkNothingLeaks(t, `sqlite:${join(tempDir(t), 'petstore.db')}`, []);
});

test('PostgreSQL: nor the database password from DATABASE_URL', async (t) => {
  if (!requirePostgres(t, 'PostgreSQL secrets test')) return;
  const url = new URL((await createTestDatabase(t)).url);
  url.password = PASSWORD; // trust authentication accepts it; it must still never be shown
  await checkNothingLeaks(t, url.toString(), [PASSWORD]);
});
