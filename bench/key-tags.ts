/**
 * What key tags cost: authenticating a key the instance has cached, tagged and untagged (the path of every
 * key before tags), against what a key not cached pays for its tag (one HMAC) and the SHA-256 a lookup
 * starts with. Nanoseconds per call, median (min–max) of alternating rounds in one process, pinned to
 * core 0. No server and no store: the authenticator's own work. Usage: npm run bench:key-tags
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { hashKey, issueKey, type ApiKey } from '../src/domain/api-key.ts';
import { HashPrefixSet } from '../src/domain/hash-prefix-set.ts';
import { KeyTags } from '../src/domain/key-tags.ts';
import { KeyAuthenticator } from '../src/http/api/key-authenticator.ts';
import type { KeyStore } from '../src/storage/store.ts';

if (!process.env.BENCH_PINNED) {
  execFileSync('taskset', ['-c', '0', process.execPath, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, BENCH_PINNED: '1' },
  });
  process.exit(0);
}

const CALLS = Number(process.env.BENCH_CALLS ?? 300_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);

const tags = new KeyTags(randomBytes(32).toString('hex'));
const tagged = issueKey('production', tags).key;
const untagged = 'pet_live_' + randomBytes(32).toString('base64url');
const record: ApiKey = {
  id: 'key_bench',
  prefix: tagged.slice(0, 15),
  environment: 'production',
  plan: 'free',
  perMinute: 60,
  perDay: 1000,
  label: null,
  createdAt: new Date(),
  revokedAt: null,
  expiresAt: null,
  subjectId: 'key_bench',
};
// Every key is found: the benchmark measures what comes before and after the store, never the store.
const store = { findKeyByHash: async () => record } as unknown as KeyStore;
const authenticator = new KeyAuthenticator(store, {
  environment: 'production',
  cacheTtlMs: 24 * 3600_000,
  clock: { now: () => 0, elapsed: () => 0 },
  tags,
  untagged: new HashPrefixSet([hashKey(untagged)]),
});
const requestWith = (key: string) => ({ headers: { authorization: `Bearer ${key}` } }) as FastifyRequest;
const cachedTagged = requestWith(tagged);
const cachedUntagged = requestWith(untagged);
await authenticator.authenticate(cachedTagged);
await authenticator.authenticate(cachedUntagged);

const cases: [string, () => unknown][] = [
  ['cached tagged key (authenticateNow)', () => authenticator.authenticateNow(cachedTagged)],
  ['cached untagged key (authenticateNow)', () => authenticator.authenticateNow(cachedUntagged)],
  ['tag check of a key not cached (KeyTags.verify)', () => tags.verify(tagged)],
  ['SHA-256 of a key, as a lookup starts (hashKey)', () => hashKey(tagged)],
];
for (const [, run] of cases) for (let i = 0; i < 50_000; i++) run();
const figures = new Map<string, number[]>(cases.map(([label]) => [label, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [label, run] of cases) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < CALLS; i++) run();
    figures.get(label)!.push(Number(process.hrtime.bigint() - start) / CALLS);
  }
}
for (const [label, ns] of figures) {
  ns.sort((a, b) => a - b);
  console.log(`${label.padEnd(48)} ${ns[ns.length >> 1]!.toFixed(0).padStart(6)} ns  (${ns[0]!.toFixed(0)}–${ns.at(-1)!.toFixed(0)})`);
}
