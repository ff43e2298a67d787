/**
 * The typed client (client/) against a live server: paging by Link, exact int64 values, idempotent
 * creates whose retries never duplicate, retries that honour Retry-After on 429, no retry on a ban,
 * typed errors with code, status and requestId; and its types are what the OpenAPI document generates.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { PetstoreClient, PetstoreError } from '../../client/src/index.ts';
import { startTestServer, type TestServer } from '../support/servers.ts';
import { tempDir } from '../support/temp.ts';

/** A client whose waits advance the server's clock instead of real time, and are recorded. */
function clientFor(server: TestServer, apiKey: string, extra: { fetch?: typeof fetch; maxDelayMs?: number } = {}) {
  const waits: number[] = [];
  const client = new PetstoreClient({
    baseUrl: server.url,
    apiKey,
    sleep: async (ms) => {
      waits.push(ms);
      server.clock.advance(ms);
    },
    random: () => 0.5,
    maxDelayMs: 120_000, // a minute window's Retry-After is worth waiting for here
    ...extra,
  });
  return { client, waits };
}

test('listPets follows the next links through every page, with a status filter too', async (t) => {
  const server = await startTestServer();
  t.after(() => server.close());
  const { client } = clientFor(server, await server.key('enterprise', { rpm: 100_000, rpd: 1_000_000 }));
  for (let i = 1; i <= 45; i++) await client.createPet({ name: `pet ${i}`, categoryId: i, status: i % 3 === 0 ? 'sold' : 'available' });
  const all = [];
  for await (const pet of client.listPets({ limit: 20 })) all.push(pet);
  assert.deepEqual(
    all.map((p) => p.name),
    Array.from({ length: 45 }, (_, i) => `pet ${i + 1}`),
  );
  assert.equal(typeof all[0]!.id, 'bigint');
  const sold = [];
  for await (const pet of client.listPets({ status: 'sold', limit: 4 })) sold.push(pet);
  assert.equal(sold.length, 15);
  assert.ok(sold.every((p) => p.status === 'sold'));
});

test('createPet is exact over int64 and idempotent: a retry with the same key returns the same pet', async (t) => {
  const server = await startTestServer();
  t.after(() => server.close());
  const { client } = clientFor(server, await server.key('enterprise', { rpm: 100_000, rpd: 1_000_000 }));
  const created = await client.createPet({ name: 'Exact', categoryId: 9223372036854775807n }, { idempotencyKey: 'client-test-1' });
  assert.equal(created.categoryId, 9223372036854775807n);
  assert.equal(created.replayed, false);
  const retried = await client.createPet({ name: 'Exact', categoryId: 9223372036854775807n }, { idempotencyKey: 'client-test-1' });
  assert.equal(retried.replayed, true);
  assert.equal(retried.id, created.id);
  assert.deepEqual(await client.getPet(created.id), {
    id: created.id,
    name: 'Exact',
    categoryId: 9223372036854775807n,
    status: 'available',
  });
  const stored = await server.store.listPets({ status: undefined, afterId: undefined, limit: 10 });
  assert.equal(stored.length, 1);
});

test('a create whose answer was lost is retried with the same key and stores one pet', async (t) => {
  const server = await startTestServer();
  t.after(() => server.close());
  let posts = 0;
  // The first POST reaches the server, but its answer is "lost" on the way back.
  const losing: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (init?.method === 'POST' && posts++ === 0) throw new TypeError('fetch failed: connection reset');
    return response;
  };
  const { client, waits } = clientFor(server, await server.key('enterprise', { rpm: 100_000, rpd: 1_000_000 }), { fetch: losing });
  const pet = await client.createPet({ name: 'Lost answer', categoryId: 1 });
  assert.equal(pet.replayed, true);
  assert.equal(waits.length, 1);
  assert.equal((await server.store.listPets({ status: undefined, afterId: undefined, limit: 10 })).length, 1);
});

test('429 is retried after Retry-After (with jitter on top); a ban is not retried; errors are typed', async (t) => {
  const server = await startTestServer({ banThreshold: 3, banGraceMs: 0 });
  t.after(() => server.close());
  const key = await server.key('free');
  let requests = 0;
  const counting: typeof fetch = (input, init) => {
    requests++;
    return fetch(input, init);
  };
  const { client, waits } = clientFor(server, key, { fetch: counting });
  for (let i = 0; i < 60; i++) await client.createPet({ name: `fill ${i}`, categoryId: 1 });
  requests = 0;
  // The 61st request in this minute is refused; the client waits until the window turns, then succeeds.
  const pet = await client.createPet({ name: 'after the wait', categoryId: 1 });
  assert.equal(pet.name, 'after the wait');
  assert.equal(requests, 2);
  const retryAfterMs = waits.at(-1)!;
  assert.ok(retryAfterMs >= 1000 && retryAfterMs <= 61_000, `waited ${retryAfterMs} ms`);

  // A typed error with the service's code and request id.
  const notFound = await client.getPet(999_999).catch((e: unknown) => e);
  assert.ok(notFound instanceof PetstoreError);
  assert.deepEqual([notFound.status, notFound.code], [404, 'not_found']);
  assert.match(notFound.requestId!, /^[0-9a-f-]{36}$/);

  // Banned: a client with no retries earns the ban quickly; then a ban is never retried, by a client
  // that would wait as long as the ban lasts for anything else.
  const impatient = new PetstoreClient({ baseUrl: server.url, apiKey: key, retries: 0 });
  for (let i = 0; i < 61; i++) await impatient.getPet(pet.id).catch(() => undefined);
  requests = 0;
  const patient = clientFor(server, key, { fetch: counting, maxDelayMs: 24 * 3_600_000 });
  const banned = await patient.client.getPet(pet.id).catch((e: unknown) => e);
  assert.ok(banned instanceof PetstoreError);
  assert.equal(banned.code, 'key_banned');
  assert.equal(requests, 1, 'a ban is not retried');
  assert.deepEqual(patient.waits, []);
});

/** A client over scripted answers (no server): for the retry rules alone. */
function scripted(
  answers: (() => Response | Promise<Response>)[],
  options: { random?: () => number; maxDelayMs?: number; timeoutMs?: number; retries?: number } = {},
) {
  const waits: number[] = [];
  let calls = 0;
  const client = new PetstoreClient({
    baseUrl: 'http://petstore.invalid',
    apiKey: 'pet_live_x',
    fetch: async () => answers[Math.min(calls++, answers.length - 1)]!(),
    sleep: async (ms) => void waits.push(ms),
    ...options,
  });
  return { client, waits, calls: () => calls };
}
const errorAnswer =
  (status: number, code: string, headers: Record<string, string> = {}) =>
  () =>
    new Response(JSON.stringify({ code, message: code, status }), { status, headers: { 'content-type': 'application/json', ...headers } });
const petAnswer = () => new Response('{"id":1,"name":"a","categoryId":1,"status":"available"}', { status: 200 });

test('503 is retried after its Retry-After; an HTTP-date Retry-After is honoured too', async () => {
  const seconds = scripted([errorAnswer(503, 'unavailable', { 'retry-after': '2' }), petAnswer], { random: () => 0 });
  assert.equal((await seconds.client.getPet(1)).name, 'a');
  assert.deepEqual([seconds.calls(), seconds.waits], [2, [2000]]);

  const date = new Date(Date.now() + 5_000).toUTCString();
  const dated = scripted([errorAnswer(429, 'rate_limited', { 'retry-after': date }), petAnswer], { random: () => 0 });
  await dated.client.getPet(1);
  assert.ok(dated.waits[0]! >= 3_000 && dated.waits[0]! <= 6_000, `waited ${dated.waits[0]} ms for ${date}`);
});

test('backoff grows exponentially with full jitter; a Retry-After beyond maxDelayMs is not waited for', async () => {
  const failing = () => Promise.reject(new TypeError('fetch failed'));
  const low = scripted([failing], { random: () => 0.1, retries: 3 });
  const high = scripted([failing], { random: () => 0.9, retries: 3 });
  for (const { client } of [low, high]) {
    const err = await client.getPet(1).catch((e: unknown) => e);
    assert.ok(err instanceof PetstoreError);
    assert.deepEqual([err.status, err.code], [0, 'network_error']);
  }
  assert.deepEqual(low.waits, [20, 40, 80]); // 0.1 of 200, 400, 800
  assert.deepEqual(high.waits, [180, 360, 720]);

  const tooLong = scripted([errorAnswer(429, 'rate_limited', { 'retry-after': '3600' }), petAnswer], { maxDelayMs: 65_000 });
  const refused = await tooLong.client.getPet(1).catch((e: unknown) => e);
  assert.ok(refused instanceof PetstoreError);
  assert.deepEqual([refused.code, refused.retryAfter, tooLong.calls(), tooLong.waits], ['rate_limited', 3600, 1, []]);
});

test('an attempt that hangs is abandoned after timeoutMs and retried', async () => {
  let attempts = 0;
  const client = new PetstoreClient({
    baseUrl: 'http://petstore.invalid',
    apiKey: 'pet_live_x',
    timeoutMs: 50,
    sleep: async () => undefined,
    fetch: (_input, init) => {
      attempts++;
      if (attempts > 1) return Promise.resolve(petAnswer());
      return new Promise((_resolve, reject) => init!.signal!.addEventListener('abort', () => reject(init!.signal!.reason)));
    },
  });
  // AbortSignal.timeout's timer does not keep the process alive; this one does, for the test's span.
  const alive = setTimeout(() => undefined, 10_000);
  try {
    assert.equal((await client.getPet(1)).name, 'a');
  } finally {
    clearTimeout(alive);
  }
  assert.equal(attempts, 2);
});

test('next links are followed whether relative or absolute, with rel quoted or not', async () => {
  const { nextLink } = await import('../../client/src/index.ts');
  assert.equal(nextLink('</v1/pets?cursor=a>; rel="next"'), '/v1/pets?cursor=a');
  assert.equal(nextLink('<https://api.example/v1/pets?cursor=b>;rel=next'), 'https://api.example/v1/pets?cursor=b');
  assert.equal(nextLink('</docs>; rel="deprecation", </v1/pets?c=1>; rel="prev next"'), '/v1/pets?c=1');
  assert.equal(nextLink('</v1/pets?c=1>; rel="prev"'), undefined);
  assert.equal(nextLink(null), undefined);
});

test('the base URL may end in /v1 or be the origin (with any path prefix); /v1 is added only when missing', async () => {
  const { apiRoot } = await import('../../client/src/index.ts');
  assert.equal(apiRoot('https://api.example/v1'), 'https://api.example/v1');
  assert.equal(apiRoot('https://api.example/v1/'), 'https://api.example/v1');
  assert.equal(apiRoot('https://api.example'), 'https://api.example/v1');
  assert.equal(apiRoot('https://api.example/'), 'https://api.example/v1');
  assert.equal(apiRoot('https://gw.example/petstore'), 'https://gw.example/petstore/v1');
  assert.equal(apiRoot('https://gw.example/petstore/v1?x=1#y'), 'https://gw.example/petstore/v1');
  assert.equal(apiRoot(new URL('http://127.0.0.1:8080')), 'http://127.0.0.1:8080/v1');
  assert.equal(apiRoot('https://api.example/v10'), 'https://api.example/v10/v1', 'only a /v1 segment counts');
  assert.throws(() => apiRoot('/v1'), TypeError, 'relative only where there is a page to be relative to');
});

test('the client types are what the committed OpenAPI document generates', (t) => {
  const out = join(tempDir(t), 'schema.ts');
  execFileSync(process.execPath, ['node_modules/openapi-typescript/bin/cli.js', 'openapi.json', '-o', out], { stdio: 'ignore' });
  assert.equal(readFileSync(out, 'utf8'), readFileSync('client/src/schema.ts', 'utf8'), 'run npm run client:types');
});
