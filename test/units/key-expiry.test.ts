/**
 * A key's expiry and a wall clock that steps (src/http/api/key-authenticator.ts): an expiry is an instant
 * of the wall clock, but a clock stepped back while the server runs does not keep a retired key working
 * longer; one stepped forward ends it early, on the side of the operator who retired it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { rotateKey } from '../../src/cli/keys.ts';
import { call, startTestServer, type TestServer } from '../support/servers.ts';

const DAY_MS = 86_400_000;

const keyIdOf = async (server: TestServer, key: string) => (await server.store.listKeys()).find((k) => key.startsWith(k.prefix))!.id;

describe('key expiry and a stepped wall clock', () => {
  test('a rotated key stops at the end of its grace in real time, though the clock was stepped back a day', async (t) => {
    const server = await startTestServer();
    t.after(() => server.close());
    const old = await server.key('pro');
    const { key: fresh } = await rotateKey(server.store, await keyIdOf(server, old), '90s', server.clock.now());
    assert.equal((await call(server, 'GET', '/v1/pets', { key: old })).status, 200);
    server.clock.step(-DAY_MS);
    server.clock.advance(60_000);
    assert.equal((await call(server, 'GET', '/v1/pets', { key: old })).status, 200, 'within its grace');
    server.clock.advance(30_000);
    const expired = await call(server, 'GET', '/v1/pets', { key: old });
    assert.equal(expired.status, 401, 'working past its grace, by the day the clock went back');
    assert.match(expired.json.message, /expired at /);
    assert.equal((await call(server, 'GET', '/v1/pets', { key: fresh })).status, 200);
  });
});
