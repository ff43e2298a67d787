/**
 * The IdempotentCreates service on a real store (a SQLite file, and PostgreSQL when
 * PETSTORE_TEST_POSTGRES_URL is set) with a clock the test moves: the outcomes a route turns into
 * answers, the release of a claim whose create failed (and only then), fencing, the take-over of a
 * claim stamped by a clock ahead once the stale age of real time has passed, and the purge of expired
 * claims at most once a minute, off the caller's path. On PostgreSQL also creates held up by a
 * lock on the pets table: one that timed out, and one whose claim was taken over while it waited.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { NewPet, Pet } from '../../src/domain/pet.ts';
import {
  CLAIM_STALE_MS,
  IDEMPOTENCY_WINDOW_MS,
  IdempotentCreates,
  PURGE_EVERY_MS,
  requestHash,
  type IdempotentCreatesOptions,
} from '../../src/services/idempotent-creates.ts';
import { CreateOutcomeUnknownError } from '../../src/storage/errors.ts';
import { openPostgresStore } from '../../src/storage/postgres/store.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import type { Store } from '../../src/storage/store.ts';
import { createTestDatabase, openTestPostgresStore, POSTGRES_URL, requirePostgres, untilWaitingOnLocks } from '../support/engines.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { atEnd, tempDir, type Owner } from '../support/temp.ts';

/** A fresh store of the engine, closed (and its database removed) when the test ends. */
type Open = (t: Owner) => Promise<Store>;

const ENGINES: { name: string; open: Open }[] = [
  {
    name: 'sqlite',
    async open(t) {
      const store = openSqliteStore({ path: join(tempDir(t), 'petstore.db'), synchronous: 'normal' });
      atEnd(t, () => store.close());
      return store;
    },
  },
  ...(POSTGRES_URL
    ? [
        {
          name: 'postgres',
          async open(t: Owner) {
            const database = await createTestDatabase(t);
            const store = await openTestPostgresStore(database.url);
            atEnd(t, () => store.close().catch(() => undefined)); // a test may have closed it already
            return store;
          },
        },
      ]
    : []),
];

if (!POSTGRES_URL)
  console.log('# SKIPPED: idempotent creates on PostgreSQL (PETSTORE_TEST_ENGINES=sqlite, or PETSTORE_TEST_POSTGRES_URL not set)');

const REX: NewPet = { name: 'Rex', categoryId: 9223372036854775807n, status: 'available' };

/** The service on a fresh store; purge errors fail the test unless it listens for them itself. */
async function withService(
  t: Owner,
  open: Open,
  fn: (creates: IdempotentCreates, store: Store, clock: FakeClock) => Promise<void>,
  options: Partial<IdempotentCreatesOptions> = {},
): Promise<void> {
  const store = await open(t);
  const clock = new FakeClock();
  const creates = new IdempotentCreates({ store, clock, onPurgeError: (err) => assert.fail(String(err)), ...options });
  await fn(creates, store, clock);
}

const scope = (idempotencyKey: string, keyId = 'key_a') => ({ keyId, idempotencyKey });
const petCount = async (store: Store) => (await store.listPets({ status: undefined, afterId: undefined, limit: 1000 })).length;

for (const engine of ENGINES) {
  describe(`idempotent creates: ${engine.name}`, () => {
    test('the first create creates; the same request again finds the same pet', (t) =>
      withService(t, engine.open, async (creates, store, clock) => {
        const first = await creates.create(scope('k1'), REX);
        assert.ok(first.outcome === 'created');
        const pet = first.pet;
        assert.deepEqual(await store.getPet(pet.id), pet);
        clock.ms += IDEMPOTENCY_WINDOW_MS - 1;
        assert.deepEqual(await creates.create(scope('k1'), { ...REX }), { outcome: 'replayed', pet });
        assert.equal(await petCount(store), 1);
      }));

    test('the same key with another pet is a mismatch and creates nothing; other callers have keys of their own', (t) =>
      withService(t, engine.open, async (creates, store) => {
        await creates.create(scope('k1'), REX);
        assert.deepEqual(await creates.create(scope('k1'), { ...REX, status: 'sold' }), { outcome: 'mismatch' });
        assert.equal(await petCount(store), 1);
        assert.equal((await creates.create(scope('k1', 'key_b'), REX)).outcome, 'created');
      }));

    test('while another request holds the key it is in flight; once that request is stale, the key is taken over', (t) =>
      withService(t, engine.open, async (creates, store, clock) => {
        const held = await store.claimIdempotencyKey(
          scope('held'),
          requestHash(REX),
          clock.ms,
          clock.ms - IDEMPOTENCY_WINDOW_MS,
          CLAIM_STALE_MS,
        );
        assert.equal(held.state, 'claimed');
        assert.deepEqual(await creates.create(scope('held'), REX), { outcome: 'in_flight', retryInMs: CLAIM_STALE_MS });
        clock.ms += CLAIM_STALE_MS - 1;
        assert.deepEqual(await creates.create(scope('held'), REX), { outcome: 'in_flight', retryInMs: 1 }, 'until it may be taken over');
        clock.ms += 1;
        const taken = await creates.create(scope('held'), REX);
        assert.equal(taken.outcome, 'created');
        // The request that held it, finishing late, makes nothing: its token is no longer the claim's.
        assert.equal(await store.createPetIdempotently(scope('held'), (held as { token: string }).token, REX), undefined);
        assert.equal(await petCount(store), 1);
      }));

    test('a claim first seen here after it was made is retried when it turns stale, not a whole stale age later', (t) =>
      withService(t, engine.open, async (creates, store, clock) => {
        await store.claimIdempotencyKey(scope('older'), requestHash(REX), clock.ms, clock.ms - IDEMPOTENCY_WINDOW_MS, CLAIM_STALE_MS);
        clock.advance(2_000);
        assert.deepEqual(await creates.create(scope('older'), REX), { outcome: 'in_flight', retryInMs: CLAIM_STALE_MS - 2_000 });
      }));

    // On SQLite a claim is taken before create() first waits, so the take-over can be put between the
    // slow request's claim and its create. On PostgreSQL the pool orders the two requests' statements;
    // "a slow create whose claim was taken over meanwhile" (below) holds the create up with a lock instead.
    const takeOverBetween =
      engine.name === 'sqlite' ? false : 'the pool orders the two requests; a lock on pets holds the create up in a test below';
    test(
      'a create whose claim was taken over before it created makes nothing, and answers with what the key holds',
      { skip: takeOverBetween },
      async (t) => {
        await withService(t, engine.open, async (creates, store, clock) => {
          const slow = creates.create(scope('raced'), REX);
          clock.ms += CLAIM_STALE_MS;
          const taker = creates.create(scope('raced'), REX);
          const [late, taken] = await Promise.all([slow, taker]);
          assert.equal(taken.outcome, 'created');
          assert.ok(late.outcome === 'replayed' || late.outcome === 'in_flight', `the late request answered ${late.outcome}`);
          if (late.outcome === 'replayed' && taken.outcome === 'created') assert.deepEqual(late.pet, taken.pet);
          assert.equal(await petCount(store), 1);
        });
      },
    );

    test('a claim written by an instance whose clock is ahead asks for no longer than the stale age', (t) =>
      withService(t, engine.open, async (creates, store, clock) => {
        await store.claimIdempotencyKey(
          scope('ahead'),
          requestHash(REX),
          clock.ms + 60_000,
          clock.ms + 60_000 - IDEMPOTENCY_WINDOW_MS,
          CLAIM_STALE_MS,
        );
        assert.deepEqual(await creates.create(scope('ahead'), REX), { outcome: 'in_flight', retryInMs: CLAIM_STALE_MS });
      }));

    // The stamp's skew must not block the key: it is taken over by real time since it was first seen.
    for (const [skew, aheadMs] of [
      ['30 s', 30_000],
      ['a day', IDEMPOTENCY_WINDOW_MS],
    ] as const) {
      test(`an unfinished claim stamped ${skew} ahead is taken over once the stale age of real time has passed since it was first seen`, (t) =>
        withService(t, engine.open, async (creates, store, clock) => {
          clock.advance(1_000); // real time has passed before the claim is first seen
          const stampedAt = clock.ms + aheadMs;
          const held = await store.claimIdempotencyKey(scope('ahead'), requestHash(REX), stampedAt, clock.ms - 1, CLAIM_STALE_MS);
          assert.equal(held.state, 'claimed');
          assert.deepEqual(await creates.create(scope('ahead'), REX), { outcome: 'in_flight', retryInMs: CLAIM_STALE_MS });
          clock.advance(CLAIM_STALE_MS - 1);
          assert.deepEqual(await creates.create(scope('ahead'), REX), { outcome: 'in_flight', retryInMs: 1 }, 'not before');
          clock.advance(1);
          const taken = await creates.create(scope('ahead'), REX);
          assert.equal(taken.outcome, 'created', 'taken over, long before the wall clock reaches the stamp');
          assert.equal(await store.createPetIdempotently(scope('ahead'), (held as { token: string }).token, REX), undefined, 'fenced');
          assert.deepEqual(await creates.create(scope('ahead'), REX), { outcome: 'replayed', pet: (taken as { pet: Pet }).pet });
          assert.equal(await petCount(store), 1);
        }));
    }

    test('claims stamped ahead under two Idempotency-Keys are each taken over by real time since it was seen', (t) =>
      withService(t, engine.open, async (creates, store, clock) => {
        const claim = (name: string, aheadMs: number) =>
          store.claimIdempotencyKey(scope(name), requestHash(REX), clock.ms + aheadMs, clock.ms - 1, CLAIM_STALE_MS);
        await claim('first', 30_000);
        await claim('second', 40_000);
        assert.equal((await creates.create(scope('first'), REX)).outcome, 'in_flight');
        clock.advance(3_000);
        assert.deepEqual(await creates.create(scope('second'), REX), { outcome: 'in_flight', retryInMs: CLAIM_STALE_MS });
        clock.advance(2_000);
        assert.equal((await creates.create(scope('first'), REX)).outcome, 'created', '5 s after the first was seen');
        assert.deepEqual(await creates.create(scope('second'), REX), { outcome: 'in_flight', retryInMs: 3_000 });
      }));

    test('a create that fails releases its claim: the corrected request may use the key', (t) =>
      withService(t, engine.open, async (creates, store) => {
        // A status the table refuses: the create fails after the claim was made.
        const refused = { ...REX, status: 'lost' } as unknown as NewPet;
        await assert.rejects(creates.create(scope('k1'), refused));
        assert.equal(await petCount(store), 0);
        assert.equal((await creates.create(scope('k1'), REX)).outcome, 'created');
      }));

    test('after the window, the key creates again', (t) =>
      withService(t, engine.open, async (creates, _store, clock) => {
        const first = await creates.create(scope('k1'), REX);
        clock.ms += IDEMPOTENCY_WINDOW_MS;
        const second = await creates.create(scope('k1'), REX);
        assert.equal(second.outcome, 'created');
        assert.notDeepEqual(second, first);
      }));

    test('expired claims are purged at most once a minute, off the caller’s path', async (t) => {
      const purges: ((deleted: number) => void)[] = [];
      const nextPurge = () => new Promise<number>((resolve) => purges.push(resolve));
      const onPurged = (deleted: number) => purges.shift()!(deleted);
      await withService(
        t,
        engine.open,
        async (creates, store, clock) => {
          const t0 = clock.ms;
          let purged = nextPurge();
          await creates.create(scope('old'), REX);
          assert.equal(await purged, 0, 'the first create of an instance purges');

          // One claim expires at the next purge; another a moment after it.
          clock.ms = t0 + IDEMPOTENCY_WINDOW_MS + PURGE_EVERY_MS;
          const soon = clock.ms - IDEMPOTENCY_WINDOW_MS + 10;
          await store.claimIdempotencyKey(scope('expires-soon'), 'h', soon, soon - IDEMPOTENCY_WINDOW_MS, CLAIM_STALE_MS);
          purged = nextPurge();
          await creates.create(scope('new-1'), REX);
          assert.equal(await purged, 1, 'the old claim');

          // Within the minute: no purge, so the claim expiring meanwhile is still stored...
          clock.ms += PURGE_EVERY_MS - 1;
          await creates.create(scope('new-2'), REX);
          // ...until the next purge, a minute after the last one.
          clock.ms += 1;
          purged = nextPurge();
          await creates.create(scope('new-3'), REX);
          assert.equal(await purged, 1, 'the claim that expired within the minute');
        },
        { onPurged },
      );
    });

    test('a purge that fails is reported, not thrown at the caller', async (t) => {
      let reported: (err: unknown) => void;
      const failure = new Promise<unknown>((resolve) => (reported = resolve));
      await withService(
        t,
        engine.open,
        async (creates, store) => {
          await store.close();
          await assert.rejects(creates.create(scope('k1'), REX));
          assert.ok((await failure) instanceof Error);
        },
        { onPurgeError: (err) => reported(err) },
      );
    });
  });
}

/**
 * PostgreSQL, where a create can outlive its caller: a statement held up by a table lock (as CREATE
 * INDEX or ALTER TABLE take one) runs on after the client gave up on it, and commits if nothing stops it.
 */
describe('idempotent creates: postgres, a create held up by a lock on pets', () => {
  /** A database of the test's own, a store on it with statements bounded at timeoutMs, and a locker. */
  async function withLockablePets(
    t: TestContext,
    timeoutMs: number,
    fn: (store: Store, lock: { take(): Promise<void>; release(): Promise<void>; waiting(n: number): Promise<void> }) => Promise<void>,
  ): Promise<void> {
    if (!requirePostgres(t, 'idempotent creates held up by a lock on PostgreSQL')) return;
    const database = await createTestDatabase(t);
    const store = await openPostgresStore({ url: database.url, poolSize: 4, timeoutMs });
    atEnd(t, () => store.close().catch(() => undefined));
    // The observer is not the locker: a transaction sees the activity statistics as it first read them.
    const [locker, observer] = [new pg.Client({ connectionString: database.url }), new pg.Client({ connectionString: database.url })];
    atEnd(t, () => Promise.all([locker.end(), observer.end()]).catch(() => undefined));
    await Promise.all([locker.connect(), observer.connect()]);
    const lock = {
      take: async () => void (await locker.query('BEGIN; LOCK TABLE pets IN SHARE MODE')),
      release: async () => void (await locker.query('COMMIT')),
      /** Until n statements of this database wait for a lock. */
      waiting: (n: number) => untilWaitingOnLocks(observer, database.url, n, 5000),
    };
    await fn(store, lock);
  }

  test('a create that timed out keeps its claim (its outcome is unknown) until it may be taken over; one pet in the end', (t) =>
    withLockablePets(t, 500, async (store, lock) => {
      const clock = new FakeClock();
      const creates = new IdempotentCreates({ store, clock, onPurgeError: (err) => assert.fail(String(err)) });
      await lock.take();
      await assert.rejects(creates.create(scope('stalled'), REX), CreateOutcomeUnknownError);
      assert.deepEqual(await creates.create(scope('stalled'), REX), { outcome: 'in_flight', retryInMs: CLAIM_STALE_MS }, 'not released');
      await lock.release();
      clock.ms += CLAIM_STALE_MS;
      // As a client honouring Retry-After: the timed-out statement may still be finishing (through a pooler, say).
      let settled = await creates.create(scope('stalled'), REX);
      for (let i = 0; settled.outcome === 'in_flight' && i < 50; i++) {
        await sleep(100);
        settled = await creates.create(scope('stalled'), REX);
      }
      // Created anew if the timed-out statement was cancelled, replayed if it committed after all.
      assert.ok(settled.outcome === 'created' || settled.outcome === 'replayed', settled.outcome);
      assert.deepEqual(await creates.create(scope('stalled'), REX), { outcome: 'replayed', pet: settled.pet });
      assert.equal(await petCount(store), 1);
    }));

  test('a slow create whose claim was taken over meanwhile makes nothing; it answers with what the key holds', (t) =>
    withLockablePets(t, 10_000, async (store, lock) => {
      // Two instances, the second's clock past the first's claim's stale age.
      const first = new IdempotentCreates({ store, clock: new FakeClock(Date.UTC(2026, 10, 22, 12)), onPurgeError: () => undefined });
      const second = new IdempotentCreates({
        store,
        clock: new FakeClock(Date.UTC(2026, 10, 22, 12) + CLAIM_STALE_MS),
        onPurgeError: () => undefined,
      });
      await lock.take();
      const slow = first.create(scope('taken'), REX);
      await lock.waiting(1);
      const taker = second.create(scope('taken'), REX);
      await lock.waiting(2);
      await lock.release();
      const [late, taken] = await Promise.all([slow, taker]);
      assert.equal(taken.outcome, 'created');
      if (late.outcome === 'replayed') assert.deepEqual(late.pet, (taken as { pet: Pet }).pet);
      else assert.equal(late.outcome, 'in_flight', 'the taker had not committed yet when the slow one looked');
      assert.equal(await petCount(store), 1);
    }));
});
