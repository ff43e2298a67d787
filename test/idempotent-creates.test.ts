/**
 * The IdempotentCreates service on a real store (a SQLite file, and PostgreSQL when
 * PETSTORE_TEST_POSTGRES_URL is set) with a clock the test moves: the outcomes a route turns into
 * answers, the release of a claim whose create failed, and the purge of expired claims at most once a
 * minute, off the caller's path.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { NewPet } from '../src/domain/pet.ts';
import {
  CLAIM_STALE_MS,
  IDEMPOTENCY_WINDOW_MS,
  IdempotentCreates,
  PURGE_EVERY_MS,
  requestHash,
  type IdempotentCreatesOptions,
} from '../src/services/idempotent-creates.ts';
import { openSqliteStore } from '../src/storage/sqlite/store.ts';
import type { Store } from '../src/storage/store.ts';
import { createTestDatabase, openTestPostgresStore, POSTGRES_URL } from './support/engines.ts';
import { tempDir } from './support/temp.ts';

interface Opened {
  store: Store;
  cleanup(): Promise<void>;
}

const ENGINES: { name: string; open: (t: { after(fn: () => void): void }) => Promise<Opened> }[] = [
  {
    name: 'sqlite',
    async open(t) {
      const store = openSqliteStore({ path: join(tempDir(t), 'petstore.db'), synchronous: 'normal' });
      return { store, cleanup: () => store.close() };
    },
  },
  ...(POSTGRES_URL
    ? [
        {
          name: 'postgres',
          async open() {
            const database = await createTestDatabase();
            const store = await openTestPostgresStore(database.url);
            // A test may have closed the store already.
            return {
              store,
              cleanup: () =>
                store
                  .close()
                  .catch(() => undefined)
                  .then(() => database.drop()),
            };
          },
        },
      ]
    : []),
];

const REX: NewPet = { name: 'Rex', categoryId: 9223372036854775807n, status: 'available' };

class Clock {
  ms = Date.UTC(2026, 10, 22, 12, 0, 0);
  readonly now = () => this.ms;
}

/** The service on a fresh store; purge errors fail the test unless it listens for them itself. */
async function withService(
  t: { after(fn: () => void): void },
  open: (t: { after(fn: () => void): void }) => Promise<Opened>,
  fn: (creates: IdempotentCreates, store: Store, clock: Clock) => Promise<void>,
  options: Partial<IdempotentCreatesOptions> = {},
): Promise<void> {
  const { store, cleanup } = await open(t);
  const clock = new Clock();
  const creates = new IdempotentCreates({ store, now: clock.now, onPurgeError: (err) => assert.fail(String(err)), ...options });
  try {
    await fn(creates, store, clock);
  } finally {
    await cleanup();
  }
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
        assert.deepEqual(
          await store.claimIdempotencyKey(scope('held'), requestHash(REX), clock.ms, IDEMPOTENCY_WINDOW_MS, CLAIM_STALE_MS),
          {
            state: 'claimed',
          },
        );
        clock.ms += CLAIM_STALE_MS - 1;
        assert.deepEqual(await creates.create(scope('held'), REX), { outcome: 'in_flight' });
        clock.ms += 1;
        assert.equal((await creates.create(scope('held'), REX)).outcome, 'created');
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
          await store.claimIdempotencyKey(scope('expires-soon'), 'h', soon, IDEMPOTENCY_WINDOW_MS, CLAIM_STALE_MS);
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
