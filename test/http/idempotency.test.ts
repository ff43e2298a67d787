/**
 * Idempotency-Key on POST /v1/pets: the first response for a key and caller is stored and replayed
 * for 24 hours with Idempotent-Replayed: true (one pet, however many retries); a different body with
 * the same key is a 422; duplicates racing the first are answered 409 (Retry-After: until the first's
 * claim may be taken over) or with the replay, never a second pet; a claimant finishing after its key
 * was taken over makes nothing; keys are scoped to the API key; a malformed key is a 400 that stores
 * nothing.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { rotateKey } from '../../src/cli/keys.ts';
import { CLAIM_STALE_MS } from '../../src/services/idempotent-creates.ts';
import { call, errorOf, startTestServer, type TestServer } from '../support/servers.ts';

const count = async (server: TestServer) => (await server.store.listPets({ status: undefined, afterId: undefined, limit: 1000 })).length;

describe('Idempotency-Key', () => {
  let server: TestServer;
  let key: string;
  test.before(async () => {
    server = await startTestServer();
    key = await server.key('enterprise', { rpm: 100_000, rpd: 1_000_000 });
  });
  test.after(() => server.close());

  test('the first response is stored and replayed, with one pet however many retries', async () => {
    const before = await count(server);
    const send = () =>
      call(server, 'POST', '/v1/pets', { key, body: { name: 'Rex', categoryId: 7 }, headers: { 'idempotency-key': 'create-rex-1' } });
    const first = await send();
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    for (let i = 0; i < 3; i++) {
      const again = await send();
      assert.equal(again.status, 201);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(again.text, first.text);
      assert.equal(again.headers.get('location'), first.headers.get('location'));
    }
    assert.equal(await count(server), before + 1);
  });

  test('the same key with a different body is a 422 and stores nothing', async () => {
    await call(server, 'POST', '/v1/pets', { key, body: { name: 'Tom', categoryId: 1 }, headers: { 'idempotency-key': 'create-tom' } });
    const before = await count(server);
    const other = await call(server, 'POST', '/v1/pets', {
      key,
      body: { name: 'Jerry', categoryId: 1 },
      headers: { 'idempotency-key': 'create-tom' },
    });
    errorOf(other, 422, 'idempotency_key_reused');
    assert.equal(await count(server), before);
    // The same pet written differently is the same request.
    const same = await call(server, 'POST', '/v1/pets', {
      key,
      body: '{ "categoryId": 1.0, "name": "Tom", "status": "available" }',
      headers: { 'idempotency-key': 'create-tom' },
    });
    assert.equal(same.status, 201);
    assert.equal(same.headers.get('idempotent-replayed'), 'true');
  });

  test('concurrent duplicates: exactly one pet; the others get 409 with Retry-After or the replay', async () => {
    const before = await count(server);
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        call(server, 'POST', '/v1/pets', { key, body: { name: 'Racer', categoryId: 3 }, headers: { 'idempotency-key': 'race-1' } }),
      ),
    );
    const fresh = answers.filter((a) => a.status === 201 && a.headers.get('idempotent-replayed') === null);
    assert.equal(fresh.length, 1, answers.map((a) => a.status).join(','));
    for (const a of answers) {
      if (a.status === 409) {
        errorOf(a, 409, 'idempotency_key_in_use');
        // The server's clock stands still: the first claim may be taken over a whole stale age later.
        assert.equal(a.headers.get('retry-after'), String(CLAIM_STALE_MS / 1000));
      } else {
        assert.equal(a.status, 201);
        assert.equal(a.text, fresh[0]!.text);
      }
    }
    assert.equal(await count(server), before + 1);
  });

  test('while the first request holds the key, a duplicate is a 409 with Retry-After until it may be taken over; then a retry creates', async () => {
    const keyId = (await server.store.listKeys()).find((k) => key.startsWith(k.prefix))!.id;
    const body = { name: 'Held', categoryId: 5 };
    // A request that claimed the key and is still creating (here: its claim, made directly).
    const hash = (await import('node:crypto'))
      .createHash('sha256')
      .update(JSON.stringify(['Held', '5', 'available']))
      .digest('hex');
    const claim = await server.store.claimIdempotencyKey(
      { keyId, idempotencyKey: 'held-1' },
      hash,
      server.clock.now(),
      server.clock.now() - 86_400_000,
      CLAIM_STALE_MS,
    );
    assert.equal(claim.state, 'claimed');
    const duplicate = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'idempotency-key': 'held-1' } });
    errorOf(duplicate, 409, 'idempotency_key_in_use');
    assert.equal(duplicate.headers.get('retry-after'), String(CLAIM_STALE_MS / 1000));
    // Retry-After counts down to the moment the claim may be taken over, in whole seconds, at least 1.
    server.clock.advance(CLAIM_STALE_MS - 1500);
    const later = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'idempotency-key': 'held-1' } });
    assert.equal(later.headers.get('retry-after'), '2');
    server.clock.advance(1499);
    const last = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'idempotency-key': 'held-1' } });
    assert.equal(last.headers.get('retry-after'), '1');
    // The claimant never finished (it crashed, or its outcome was unknown): now a retry takes the key over and creates.
    server.clock.advance(1);
    const retried = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'idempotency-key': 'held-1' } });
    assert.equal(retried.status, 201);
    assert.equal(retried.headers.get('idempotent-replayed'), null);
    // The claimant, finishing late, makes nothing: the key was taken over with a new token.
    assert.equal(
      await server.store.createPetIdempotently({ keyId, idempotencyKey: 'held-1' }, (claim as { token: string }).token, {
        name: 'Held',
        categoryId: 5n,
        status: 'available',
      }),
      undefined,
    );
    const replay = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'idempotency-key': 'held-1' } });
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.text, retried.text);
  });

  test('keys are scoped to the API key, and expire after 24 hours', async () => {
    const otherKey = await server.key('enterprise', { rpm: 100_000, rpd: 1_000_000 });
    const mine = await call(server, 'POST', '/v1/pets', {
      key,
      body: { name: 'Scoped', categoryId: 1 },
      headers: { 'idempotency-key': 'shared-name' },
    });
    const theirs = await call(server, 'POST', '/v1/pets', {
      key: otherKey,
      body: { name: 'Scoped', categoryId: 1 },
      headers: { 'idempotency-key': 'shared-name' },
    });
    assert.equal(theirs.headers.get('idempotent-replayed'), null);
    assert.notEqual(theirs.json.id, mine.json.id);

    server.clock.advance(24 * 60 * 60 * 1000 + 1);
    const later = await call(server, 'POST', '/v1/pets', {
      key,
      body: { name: 'Scoped', categoryId: 1 },
      headers: { 'idempotency-key': 'shared-name' },
    });
    assert.equal(later.status, 201);
    assert.equal(later.headers.get('idempotent-replayed'), null);
    assert.notEqual(later.json.id, mine.json.id);
  });

  test('a retry sent with the key that replaced the first by rotation is the same caller: the replay, no second pet', async () => {
    const old = await server.key('enterprise', { rpm: 100_000, rpd: 1_000_000 });
    const body = { name: 'Rotated', categoryId: 3 };
    const first = await call(server, 'POST', '/v1/pets', { key: old, body, headers: { 'idempotency-key': 'rotate-1' } });
    assert.equal(first.status, 201);
    const id = (await server.store.listKeys()).find((k) => old.startsWith(k.prefix))!.id;
    const { key: fresh } = await rotateKey(server.store, id, '1h', server.clock.now());
    const before = await count(server);
    const retried = await call(server, 'POST', '/v1/pets', { key: fresh, body, headers: { 'idempotency-key': 'rotate-1' } });
    assert.equal(retried.status, 201);
    assert.equal(retried.headers.get('idempotent-replayed'), 'true');
    assert.equal(retried.json.id, first.json.id);
    assert.equal(await count(server), before);
  });

  test('a wall clock stepped forward a day and back forgets no claim: the retry is the replay', async () => {
    const body = { name: 'Stepped', categoryId: 4 };
    const first = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'idempotency-key': 'stepped-1' } });
    assert.equal(first.status, 201);
    server.clock.step(24 * 60 * 60 * 1000 + 60_000);
    // A create on the stepped clock would purge what looks a day old, were the purge to follow the wall clock.
    const between = await call(server, 'POST', '/v1/pets', { key, body: { name: 'Other', categoryId: 4 } });
    assert.equal(between.status, 201);
    const during = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'idempotency-key': 'stepped-1' } });
    assert.equal(during.headers.get('idempotent-replayed'), 'true', 'not forgotten while the clock is ahead');
    server.clock.step(-(24 * 60 * 60 * 1000 + 60_000));
    const after = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'idempotency-key': 'stepped-1' } });
    assert.equal(after.headers.get('idempotent-replayed'), 'true');
    assert.equal(after.json.id, first.json.id);
  });

  test('a Structured Field string key and the same text unquoted are one key; quoted keys may hold spaces', async () => {
    const send = (header: string) =>
      call(server, 'POST', '/v1/pets', { key, body: { name: 'Quoted', categoryId: 3 }, headers: { 'idempotency-key': header } });
    const first = await send('"sf-key-1"');
    assert.equal(first.status, 201);
    const bare = await send('sf-key-1');
    assert.equal(bare.headers.get('idempotent-replayed'), 'true');
    assert.equal(bare.json.id, first.json.id);
    const spaced = await send('"with a space \\" and a quote"');
    assert.equal(spaced.status, 201);
    assert.equal((await send('"with a space \\" and a quote"')).headers.get('idempotent-replayed'), 'true');
  });

  test('expired keys are purged from storage, not only forgotten', async () => {
    const scope = { keyId: 'key_purge', idempotencyKey: 'old' };
    const t0 = server.clock.now();
    assert.equal((await server.store.claimIdempotencyKey(scope, 'h', t0, t0 - 86_400_000, CLAIM_STALE_MS)).state, 'claimed');
    assert.equal(await server.store.purgeIdempotencyKeys(t0 - 1), 0);
    // A create more than a day later purges every claim made before its window.
    server.clock.advance(24 * 60 * 60 * 1000 + 61_000);
    await call(server, 'POST', '/v1/pets', { key, body: { name: 'Purger', categoryId: 1 }, headers: { 'idempotency-key': 'purger' } });
    await new Promise((r) => setTimeout(r, 100)); // the purge runs off the request's path
    assert.equal(await server.store.purgeIdempotencyKeys(t0), 0, 'the old claim was already purged');
    // A claim with a different request for the same key is free again: nothing of the old one is left.
    assert.equal(
      (await server.store.claimIdempotencyKey(scope, 'other', server.clock.now(), server.clock.now() - 86_400_000, CLAIM_STALE_MS)).state,
      'claimed',
    );
  });

  test('a malformed Idempotency-Key is a 400 that says what a key is, and stores nothing', async () => {
    const before = await count(server);
    const FORM = 'must be visible ASCII characters without spaces, or a double-quoted string';
    for (const [bad, problem] of [
      ['x'.repeat(256), 'must be 1 to 255 characters long'],
      ['has space', FORM],
      ['""', FORM],
      ['"unterminated', FORM],
      ['"bad \\ escape"', FORM],
    ] as const) {
      const res = await call(server, 'POST', '/v1/pets', {
        key,
        body: { name: 'Bad key', categoryId: 1 },
        headers: { 'idempotency-key': bad },
      });
      const err = errorOf(res, 400, 'invalid_request');
      assert.deepEqual(err.details, [{ field: 'idempotency-key', problem }], bad);
      assert.equal(err.message, `Invalid header: idempotency-key ${problem}`);
    }
    assert.equal(await count(server), before);
  });

  test('an invalid body with a key stores no claim: the key stays free for the corrected request', async () => {
    errorOf(
      await call(server, 'POST', '/v1/pets', { key, body: { name: '', categoryId: 1 }, headers: { 'idempotency-key': 'fix-me' } }),
      400,
      'invalid_request',
    );
    const fixed = await call(server, 'POST', '/v1/pets', {
      key,
      body: { name: 'Fixed', categoryId: 1 },
      headers: { 'idempotency-key': 'fix-me' },
    });
    assert.equal(fixed.status, 201);
    assert.equal(fixed.headers.get('idempotent-replayed'), null);
  });
});
