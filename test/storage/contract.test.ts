/**
 * The storage contract: every engine that implements Store must pass the same cases. Each engine in
 * ENGINES below gives a way to open a fresh, empty database; `storageContract` runs every case
 * against it. To add PostgreSQL later, append an entry whose `open` creates a fresh schema (or
 * database), whose `reopen` closes the store and opens a new one on the same schema, and whose
 * `migrationRows` reads schema_migrations through a separate client; engine-only checks (WAL mode
 * for SQLite) go in its `extra` function.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import type { Environment } from '../../src/domain/api-key.ts';
import { INT64_MAX } from '../../src/domain/int64.ts';
import { NAME_MAX_LENGTH, nameProblem, PET_STATUSES, type NewPet, type Pet } from '../../src/domain/pet.ts';
import { petJson, petsJson } from '../../src/domain/pet-json.ts';
import type { Plan } from '../../src/domain/plans.ts';
import { LATEST_SQLITE_VERSION } from '../../src/storage/sqlite/migrations.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import type { ListPetsQuery, NewApiKey, Store } from '../../src/storage/store.ts';
import pg from 'pg';
import { LATEST_POSTGRES_VERSION } from '../../src/storage/postgres/migrations.ts';
import { createTestDatabase, openTestPostgresStore, POSTGRES_URL } from '../support/engines.ts';
import { atEnd, tempDir, type Owner } from '../support/temp.ts';

export interface MigrationRow {
  version: number;
  name: string;
  appliedAt: number;
}

/** One open database for one test. */
export interface Harness {
  store: Store;
  /**
   * Closes the current store and opens a new one on the same database, as a restarted process
   * would. The returned store becomes `store`; the earlier one must not be used again.
   */
  reopen(): Promise<Store>;
  /** The rows of schema_migrations, read through a connection of its own, not through the Store. */
  migrationRows(): Promise<MigrationRow[]>;
  /** Moves the pets' id sequence behind the store, through a connection of its own: the next pet created gets `id`. */
  setNextPetId(id: bigint): Promise<void>;
}

/** Opens a fresh database whose store is closed, and the database removed, when the owner (a test) ends. */
export type Open = (owner: Owner) => Promise<Harness>;

export interface Engine {
  name: Store['engine'];
  open: Open;
  /** Checks that only make sense for this engine. */
  extra?: (open: Open) => void;
}

// ---------------------------------------------------------------------------------------------------
// Engines

function sqliteHarness(owner: Owner): Promise<Harness> {
  const path = join(tempDir(owner), 'petstore.db');
  const openStore = () => openSqliteStore({ path, synchronous: 'normal' });
  let current = openStore();
  atEnd(owner, () => current.close()); // the store open then: closing a SQLite store twice is harmless
  const harness: Harness = {
    get store() {
      return current;
    },
    async reopen() {
      await current.close();
      current = openStore();
      return current;
    },
    async migrationRows() {
      const db = new DatabaseSync(path, { readOnly: true });
      try {
        const rows = db.prepare('SELECT version, name, applied_at FROM schema_migrations ORDER BY version').all() as unknown as {
          version: number;
          name: string;
          applied_at: number;
        }[];
        return rows.map((r) => ({ version: r.version, name: r.name, appliedAt: r.applied_at }));
      } finally {
        db.close();
      }
    },
    async setNextPetId(id) {
      const db = new DatabaseSync(path, { timeout: 5000 });
      try {
        // AUTOINCREMENT gives the greater of this and the highest id, plus one.
        if (db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'pets'").run(id - 1n).changes === 0) {
          db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('pets', ?)").run(id - 1n);
        }
      } finally {
        db.close();
      }
    },
  };
  return Promise.resolve(harness);
}

function sqliteExtra(): void {
  describe('sqlite only', () => {
    const withFile = (t: TestContext, fn: (path: string) => Promise<void>) => fn(join(tempDir(t), 'petstore.db'));

    test('the database file is in WAL mode, as seen by another connection', async (t) => {
      await withFile(t, async (path) => {
        const store = openSqliteStore({ path, synchronous: 'normal' });
        try {
          const raw = new DatabaseSync(path);
          try {
            assert.equal(raw.prepare('PRAGMA journal_mode').get()!.journal_mode, 'wal');
          } finally {
            raw.close();
          }
        } finally {
          await store.close();
        }
      });
    });

    test('a pet id is not reused after the highest row is deleted behind the store (AUTOINCREMENT)', async (t) => {
      await withFile(t, async (path) => {
        let store = openSqliteStore({ path, synchronous: 'normal' });
        try {
          for (let i = 0; i < 3; i++) await store.createPet(newPet(`p${i}`));
          const raw = new DatabaseSync(path);
          try {
            assert.equal(raw.prepare('DELETE FROM pets WHERE id = 3').run().changes, 1);
          } finally {
            raw.close();
          }
          assert.equal((await store.createPet(newPet('after delete'))).id, 4n);
          await store.close();

          store = openSqliteStore({ path, synchronous: 'normal' });
          const raw2 = new DatabaseSync(path);
          try {
            raw2.prepare('DELETE FROM pets WHERE id = 4').run();
          } finally {
            raw2.close();
          }
          assert.equal((await store.createPet(newPet('after reopen'))).id, 5n);
        } finally {
          await store.close();
        }
      });
    });

    test('a page assembled partly from pets read before and partly from the table is the text of a fresh read', async (t) => {
      await withFile(t, async (path) => {
        const raw = new DatabaseSync(path);
        let store = openSqliteStore({ path, synchronous: 'normal' });
        try {
          for (let i = 0; i < 6; i++) await store.createPet(newPet(`p${i} "é"`, { status: i % 2 ? 'sold' : 'available' }));
          // Ids at the top of the int64 range, written behind the store: decimal text must round-trip exactly.
          raw.exec(
            "INSERT INTO pets (id, name, category_id, status) VALUES (9223372036854775806, 'high', 1, 'sold'), (9223372036854775807, 'top', 2, 'sold')",
          );
          const queries: ListPetsQuery[] = [
            { status: undefined, afterId: 2n, limit: 2 }, // pets 3 and 4 read first
            { status: undefined, afterId: undefined, limit: 100 }, // then every pet, most of them not read yet
            { status: 'sold', afterId: 4n, limit: 2 },
            { status: 'sold', afterId: 9223372036854775806n, limit: 2 },
          ];
          const warm = [];
          for (const query of queries) warm.push(await store.listPetsJson(query));
          await store.close();
          // Each page again from a store that has read nothing before it.
          for (const [i, query] of queries.entries()) {
            store = openSqliteStore({ path, synchronous: 'normal' });
            assert.deepEqual(await store.listPetsJson(query), warm[i], `page ${i}`);
            await store.close();
          }
          store = openSqliteStore({ path, synchronous: 'normal' });
          assert.match(warm[1]!.json, /\{"id":9223372036854775807,"name":"top","categoryId":2,"status":"sold"\}\]$/);
          assert.deepEqual(warm[2], {
            json: '[{"id":6,"name":"p5 \\"é\\"","categoryId":1,"status":"sold"},{"id":9223372036854775806,"name":"high","categoryId":1,"status":"sold"}]',
            lastId: 9223372036854775806n,
            more: true,
          });
          assert.deepEqual(warm[3], {
            json: '[{"id":9223372036854775807,"name":"top","categoryId":2,"status":"sold"}]',
            lastId: undefined,
            more: false,
          });
        } finally {
          raw.close();
          await store.close();
        }
      });
    });

    test('synchronous=full opens and stores like normal', async (t) => {
      await withFile(t, async (path) => {
        const store = openSqliteStore({ path, synchronous: 'full' });
        try {
          const pet = await store.createPet(newPet('full'));
          assert.deepEqual(await store.getPet(pet.id), pet);
        } finally {
          await store.close();
        }
      });
    });
  });
}

async function postgresHarness(owner: Owner): Promise<Harness> {
  const database = await createTestDatabase(owner);
  let current = await openTestPostgresStore(database.url);
  let closed = false;
  atEnd(owner, async () => {
    if (!closed) await current.close();
    closed = true;
  });
  return {
    get store() {
      return current;
    },
    async reopen() {
      if (!closed) await current.close();
      closed = true;
      current = await openTestPostgresStore(database.url);
      closed = false;
      return current;
    },
    async migrationRows() {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        const { rows } = await client.query('SELECT version, name, applied_at FROM schema_migrations ORDER BY version');
        return rows.map((r) => ({ version: r.version, name: r.name, appliedAt: Number(r.applied_at) }));
      } finally {
        await client.end();
      }
    },
    async setNextPetId(id) {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        await client.query("SELECT setval(pg_get_serial_sequence('pets', 'id'), $1, false)", [id.toString()]);
      } finally {
        await client.end();
      }
    },
  };
}

function postgresExtra(): void {
  describe('postgres only', () => {
    test('five instances migrating one new database at once apply each version exactly once', async (t) => {
      const database = await createTestDatabase(t);
      const stores = await Promise.all(Array.from({ length: 5 }, () => openTestPostgresStore(database.url)));
      atEnd(t, () => Promise.all(stores.map((s) => s.close())));
      const client = new pg.Client({ connectionString: database.url });
      atEnd(t, () => client.end());
      await client.connect();
      const { rows } = await client.query('SELECT version FROM schema_migrations ORDER BY version');
      assert.deepEqual(
        rows.map((r) => r.version),
        Array.from({ length: LATEST_POSTGRES_VERSION }, (_, i) => i + 1),
      );
    });

    test('a create that PostgreSQL refuses fails alone: the creates sent with it are stored', async (t) => {
      const database = await createTestDatabase(t);
      const store = await openTestPostgresStore(database.url);
      atEnd(t, () => store.close());
      // PostgreSQL refuses NUL in text (the API refuses it before the store); sent among others, it
      // fails their shared statement, and each is then inserted alone.
      const results = await Promise.allSettled(
        ['first', 'nul \u0000 inside', 'third'].map((name) => store.createPet({ name, categoryId: 1n, status: 'available' })),
      );
      assert.equal(results[0]!.status, 'fulfilled');
      assert.equal(results[1]!.status, 'rejected');
      assert.equal(results[2]!.status, 'fulfilled');
      assert.deepEqual(
        // Inserted alone, concurrently: in either order.
        (await store.listPets({ status: undefined, afterId: undefined, limit: 10 })).map((p) => p.name).sort(),
        ['first', 'third'],
      );
    });

    test('keyset pagination by a rare status reads the (status, id) index', async (t) => {
      const database = await createTestDatabase(t);
      const store = await openTestPostgresStore(database.url);
      await store.close();
      const client = new pg.Client({ connectionString: database.url });
      atEnd(t, () => client.end());
      await client.connect();
      await client.query(`INSERT INTO pets (name, category_id, status)
        SELECT 'p' || g, 1, CASE WHEN g % 100 = 0 THEN 'sold' ELSE 'available' END FROM generate_series(1, 20000) g`);
      await client.query('ANALYZE pets');
      const { rows } = await client.query("EXPLAIN SELECT id FROM pets WHERE status = 'sold' AND id > 100 ORDER BY id LIMIT 21");
      assert.match(rows.map((r) => r['QUERY PLAN']).join('\n'), /pets_status_id/);
    });
  });
}

/** Every engine the contract runs against: SQLite always, PostgreSQL when the machine has one for tests. */
const ENGINES: Engine[] = [
  { name: 'sqlite', open: sqliteHarness, extra: sqliteExtra },
  ...(POSTGRES_URL ? [{ name: 'postgres' as const, open: postgresHarness, extra: postgresExtra }] : []),
];
if (!POSTGRES_URL)
  console.log('# SKIPPED: the storage contract on PostgreSQL (PETSTORE_TEST_ENGINES=sqlite, or PETSTORE_TEST_POSTGRES_URL not set)');

// ---------------------------------------------------------------------------------------------------
// Fixtures

function newPet(name: string, overrides: Partial<NewPet> = {}): NewPet {
  return { name, categoryId: 1n, status: 'available', ...overrides };
}

let keySeq = 0;
function newKey(overrides: Partial<NewApiKey> = {}): NewApiKey {
  keySeq++;
  const n = String(keySeq).padStart(4, '0');
  return {
    id: `key_${n}`,
    hash: n.repeat(16),
    prefix: `pet_live_${n}`,
    environment: 'production' as Environment,
    plan: 'free' as Plan,
    perMinute: 60,
    perDay: 1000,
    label: null,
    subjectId: null,
    tagged: true,
    ...overrides,
  };
}

const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * Names whose JSON is easy to get wrong, each one the API accepts: 1 to NAME_MAX_LENGTH characters,
 * no NUL and no unpaired surrogate (the API refuses both before a store sees them: nameProblem).
 */
const AWKWARD_NAMES = [
  'Rex',
  'quote " backslash \\ slash / and both \\"',
  // Every C0 control character but NUL: JSON must escape each, some as \b \f \n \r \t, the rest as \u00XX.
  Array.from({ length: 31 }, (_, i) => String.fromCharCode(i + 1)).join(''),
  'DEL \u007f, C1 \u0080 \u0085 \u009f',
  'line \u2028 and paragraph \u2029 separators',
  'emoji 🐈‍⬛ 🏳️‍🌈 👩🏽‍🚀 🇫🇷',
  'BOM \ufeff, noncharacters \ufffe \uffff, replacement \ufffd',
  'é composed, e\u0301 decomposed',
  `</script><!-- & ' <>`,
  '  spaces around  ',
  'x'.repeat(NAME_MAX_LENGTH),
  '🐕'.repeat(NAME_MAX_LENGTH), // 200 UTF-16 units, 400 UTF-8 bytes
  '\u001f'.repeat(NAME_MAX_LENGTH), // each written as a six-byte escape
  '"'.repeat(NAME_MAX_LENGTH),
  '\\'.repeat(NAME_MAX_LENGTH),
  '\u2028'.repeat(NAME_MAX_LENGTH),
];

/** Category ids at the edges: the smallest, the first a double cannot hold, the largest. */
const EDGE_CATEGORY_IDS = [1n, 2n ** 53n + 1n, INT64_MAX];

// ---------------------------------------------------------------------------------------------------
// The contract

export function storageContract(name: string, open: Open): void {
  describe(`storage contract: ${name}`, () => {
    /** Runs a case on a fresh database, removed when the test ends. */
    const withStore = async (t: TestContext, fn: (h: Harness) => Promise<void>) => fn(await open(t));

    test('reports its engine name', (t) =>
      withStore(t, async ({ store }) => {
        assert.equal(store.engine, name);
      }));

    describe('pets', () => {
      test('createPet returns ids increasing from 1 with exactly the given fields', (t) =>
        withStore(t, async ({ store }) => {
          const a = await store.createPet({ name: 'Rex', categoryId: 7n, status: 'available' });
          const b = await store.createPet({ name: 'Mía 🐈 “quoted”', categoryId: 1n, status: 'pending' });
          const c = await store.createPet({ name: 'x', categoryId: 2n, status: 'sold' });
          assert.deepEqual(a, { id: 1n, name: 'Rex', categoryId: 7n, status: 'available' } satisfies Pet);
          assert.deepEqual(b, { id: 2n, name: 'Mía 🐈 “quoted”', categoryId: 1n, status: 'pending' } satisfies Pet);
          assert.deepEqual(c, { id: 3n, name: 'x', categoryId: 2n, status: 'sold' } satisfies Pet);
          assert.equal(typeof a.id, 'bigint');
          assert.equal(typeof a.categoryId, 'bigint');
        }));

      test('creates sent together are stored once each, every caller getting its own pet', (t) =>
        withStore(t, async ({ store }) => {
          const names = Array.from({ length: 150 }, (_, i) => `together ${i} \\ "quoted" {brace}, comma`);
          const created = await Promise.all(names.map((name, i) => store.createPet({ name, categoryId: BigInt(i + 1), status: 'sold' })));
          created.forEach((pet, i) => assert.deepEqual(pet, { id: pet.id, name: names[i]!, categoryId: BigInt(i + 1), status: 'sold' }));
          assert.equal(new Set(created.map((p) => p.id)).size, 150);
          const stored = await store.listPets({ status: undefined, afterId: undefined, limit: 100 });
          const rest = await store.listPets({ status: undefined, afterId: stored.at(-1)!.id, limit: 100 });
          assert.deepEqual(
            [...stored, ...rest].sort((a, b) => (a.id < b.id ? -1 : 1)),
            [...created].sort((a, b) => (a.id < b.id ? -1 : 1)),
          );
        }));

      test('getPet returns what createPet returned', (t) =>
        withStore(t, async ({ store }) => {
          const created = await store.createPet(newPet('Fido', { categoryId: 42n, status: 'sold' }));
          assert.deepEqual(await store.getPet(created.id), created);
        }));

      for (const categoryId of [9223372036854775807n, 9007199254740993n]) {
        test(`categoryId ${categoryId} round-trips exactly through createPet, getPet and listPets`, (t) =>
          withStore(t, async ({ store }) => {
            const created = await store.createPet(newPet('big', { categoryId }));
            assert.equal(created.categoryId, categoryId);
            const fetched = await store.getPet(created.id);
            assert.equal(fetched?.categoryId, categoryId);
            const listed = await store.listPets({ status: undefined, afterId: undefined, limit: 10 });
            assert.equal(listed.length, 1);
            assert.equal(listed[0]?.categoryId, categoryId);
          }));
      }

      test('getPet of an id that does not exist is undefined', (t) =>
        withStore(t, async ({ store }) => {
          assert.equal(await store.getPet(1n), undefined);
          await store.createPet(newPet('only'));
          assert.equal(await store.getPet(2n), undefined);
          assert.equal(await store.getPet(9223372036854775807n), undefined);
        }));

      test('listPets of an empty store is empty', (t) =>
        withStore(t, async ({ store }) => {
          assert.deepEqual(await store.listPets({ status: undefined, afterId: undefined, limit: 10 }), []);
          assert.deepEqual(await store.listPets({ status: 'sold', afterId: 5n, limit: 10 }), []);
        }));

      describe('listPets', () => {
        // Ids 1..9, statuses cycling available, pending, sold.
        const statuses = ['available', 'pending', 'sold'] as const;
        const seed = async (store: Store) => {
          const pets: Pet[] = [];
          for (let i = 0; i < 9; i++) pets.push(await store.createPet(newPet(`pet${i + 1}`, { status: statuses[i % 3]! })));
          return pets;
        };
        const ids = (pets: Pet[]) => pets.map((p) => p.id);

        test('listPetsJson writes the same pages as listPets, in the text petsJson writes', (t) =>
          withStore(t, async ({ store }) => {
            await seed(store);
            await store.createPet(newPet('quote " backslash \\ tab \t line\n é 🐈 \u2028', { categoryId: 9223372036854775807n }));
            const asPets = (json: string) =>
              (
                JSON.parse(json, (_key, value, context?: { source?: string }) =>
                  typeof value === 'number' ? BigInt(context!.source!) : value,
                ) as Record<string, unknown>[]
              ).map((p) => ({
                id: p.id,
                name: p.name,
                categoryId: p.categoryId,
                status: p.status,
              }));
            for (const [status, afterId, limit] of [
              [undefined, undefined, 100],
              [undefined, undefined, 4],
              [undefined, 4n, 3],
              [undefined, 8n, 10],
              [undefined, 10n, 10],
              ['sold', undefined, 2],
              ['sold', 3n, 10],
              ['pending', 8n, 10],
            ] as const) {
              const rows = await store.listPets({ status, afterId, limit: limit + 1 });
              const page = await store.listPetsJson({ status, afterId, limit });
              const label = `${status}/${afterId}/${limit}`;
              assert.deepEqual(asPets(page.json), rows.slice(0, limit), label);
              // Byte for byte: the page's ETag is a digest of this text.
              assert.equal(page.json, petsJson(rows.slice(0, limit)), label);
              assert.equal(page.more, rows.length > limit, label);
              assert.equal(page.lastId, rows.length >= limit ? rows[limit - 1]!.id : undefined, label);
            }
          }));

        test('listPetsJson writes awkward pets, pages and single pets, byte for byte as petJson does', (t) =>
          withStore(t, async (h) => {
            for (const name of AWKWARD_NAMES) {
              assert.equal(nameProblem(name), undefined, name);
              assert.ok([...name].length <= NAME_MAX_LENGTH, name);
            }
            // Every status and category edge with every kind of name; ids from 1, around 2^53, and up to 2^63 - 1.
            const news = AWKWARD_NAMES.map((name, i) =>
              newPet(name, { status: PET_STATUSES[i % 3]!, categoryId: EDGE_CATEGORY_IDS[Math.floor(i / 3) % 3]! }),
            );
            const pets: Pet[] = [];
            for (const [i, pet] of news.entries()) {
              if (i === 5) await h.setNextPetId(2n ** 53n - 1n);
              if (i === 10) await h.setNextPetId(INT64_MAX - BigInt(news.length - 1 - i));
              pets.push(await h.store.createPet(pet));
            }
            assert.equal(pets.at(-1)!.id, INT64_MAX);
            assert.ok(pets.some((p) => p.id === 2n ** 53n + 1n));

            const walk = async (status: Pet['status'] | undefined, limit: number) => {
              const expected = pets.filter((p) => status === undefined || p.status === status);
              let afterId: bigint | undefined;
              for (let at = 0; ; at += limit) {
                const page = await h.store.listPetsJson({ status, afterId, limit });
                const label = `${h.store.engine}: status ${status}, limit ${limit}, after ${afterId}`;
                assert.equal(page.json, petsJson(expected.slice(at, at + limit)), label);
                assert.equal(page.more, expected.length > at + limit, label);
                assert.equal(page.lastId, expected.length >= at + limit ? expected[at + limit - 1]!.id : undefined, label);
                if (!page.more) break;
                afterId = page.lastId;
              }
            };
            // One status first, so later pages are assembled partly from pets an engine may have kept.
            for (const limit of [100, 1, 2, 7])
              for (const status of ['sold', undefined, ...PET_STATUSES] as const) await walk(status, limit);
            await h.reopen(); // nothing kept: every pet written afresh
            await walk(undefined, 100);

            for (const pet of pets) {
              const label = `${h.store.engine}: pet ${pet.id}`;
              assert.deepEqual(await h.store.getPet(pet.id), pet, label); // what getPet's route writes petJson of
              for (const status of [pet.status, undefined]) {
                const page = await h.store.listPetsJson({ status, afterId: pet.id - 1n, limit: 1 });
                assert.equal(page.json, `[${petJson(pet)}]`, label);
              }
            }
          }));

        test('orders by ascending id and returns the stored pets', (t) =>
          withStore(t, async ({ store }) => {
            const pets = await seed(store);
            const listed = await store.listPets({ status: undefined, afterId: undefined, limit: 100 });
            assert.deepEqual(listed, pets);
            assert.deepEqual(ids(listed), [1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n]);
          }));

        test('honours limit', (t) =>
          withStore(t, async ({ store }) => {
            await seed(store);
            assert.deepEqual(ids(await store.listPets({ status: undefined, afterId: undefined, limit: 4 })), [1n, 2n, 3n, 4n]);
            assert.deepEqual(ids(await store.listPets({ status: undefined, afterId: undefined, limit: 1 })), [1n]);
            assert.equal((await store.listPets({ status: undefined, afterId: undefined, limit: 9 })).length, 9);
          }));

        test('afterId returns only ids strictly greater', (t) =>
          withStore(t, async ({ store }) => {
            await seed(store);
            assert.deepEqual(ids(await store.listPets({ status: undefined, afterId: 4n, limit: 3 })), [5n, 6n, 7n]);
            assert.deepEqual(ids(await store.listPets({ status: undefined, afterId: 8n, limit: 10 })), [9n]);
            assert.deepEqual(await store.listPets({ status: undefined, afterId: 9n, limit: 10 }), []);
            assert.deepEqual(await store.listPets({ status: undefined, afterId: 9223372036854775807n, limit: 10 }), []);
          }));

        test('paging with afterId = last id of the previous page visits every pet once', (t) =>
          withStore(t, async ({ store }) => {
            const pets = await seed(store);
            const seen: bigint[] = [];
            let afterId: bigint | undefined;
            for (;;) {
              const page = await store.listPets({ status: undefined, afterId, limit: 2 });
              if (page.length === 0) break;
              seen.push(...ids(page));
              afterId = page.at(-1)!.id;
            }
            assert.deepEqual(seen, ids(pets));
          }));

        test('status filter returns only pets with that status', (t) =>
          withStore(t, async ({ store }) => {
            await seed(store);
            const pending = await store.listPets({ status: 'pending', afterId: undefined, limit: 100 });
            assert.deepEqual(ids(pending), [2n, 5n, 8n]);
            assert.ok(pending.every((p) => p.status === 'pending'));
            assert.deepEqual(ids(await store.listPets({ status: 'sold', afterId: undefined, limit: 100 })), [3n, 6n, 9n]);
            assert.deepEqual(ids(await store.listPets({ status: 'available', afterId: undefined, limit: 100 })), [1n, 4n, 7n]);
          }));

        test('status filter, afterId and limit together', (t) =>
          withStore(t, async ({ store }) => {
            await seed(store);
            assert.deepEqual(ids(await store.listPets({ status: 'available', afterId: 1n, limit: 1 })), [4n]);
            assert.deepEqual(ids(await store.listPets({ status: 'available', afterId: 1n, limit: 10 })), [4n, 7n]);
            assert.deepEqual(ids(await store.listPets({ status: 'sold', afterId: 3n, limit: 10 })), [6n, 9n]);
            assert.deepEqual(ids(await store.listPets({ status: 'sold', afterId: 5n, limit: 1 })), [6n]);
            assert.deepEqual(await store.listPets({ status: 'pending', afterId: 8n, limit: 10 }), []);
          }));
      });
    });

    describe('durability and restarts', () => {
      test('ids keep increasing across a close and reopen and are never reused', (t) =>
        withStore(t, async (h) => {
          for (let i = 0; i < 3; i++) await h.store.createPet(newPet(`before${i}`));
          const store = await h.reopen();
          const next = await store.createPet(newPet('after'));
          assert.equal(next.id, 4n);
          const again = await (await h.reopen()).createPet(newPet('after again'));
          assert.equal(again.id, 5n);
        }));

      test('pets, keys and bans survive a close and reopen of the same database', (t) =>
        withStore(t, async (h) => {
          const pets = [
            await h.store.createPet(newPet('a', { categoryId: 9223372036854775807n, status: 'sold' })),
            await h.store.createPet(newPet('b', { status: 'pending' })),
          ];
          const key = await h.store.createKey(newKey({ label: 'survivor' }));
          const until = Date.now() + 60_000;
          await h.store.banKey(key.id, until);

          const store = await h.reopen();
          assert.deepEqual(await store.listPets({ status: undefined, afterId: undefined, limit: 10 }), pets);
          assert.deepEqual(await store.getPet(pets[0]!.id), pets[0]);
          assert.deepEqual(await store.listKeys(), [key]);
          assert.equal(await store.banEndOf(key.id, Date.now()), until);
        }));

      test('migrations are idempotent: reopening applies nothing a second time', (t) =>
        withStore(t, async (h) => {
          const first = await h.migrationRows();
          assert.deepEqual(
            first.map((r) => r.version),
            Array.from({ length: first.length }, (_, i) => i + 1),
            'versions 1..n, each once',
          );
          assert.ok(first.length >= 1);
          assert.equal(first.at(-1)!.version, name === 'sqlite' ? LATEST_SQLITE_VERSION : LATEST_POSTGRES_VERSION);
          const pet = await h.store.createPet(newPet('kept'));
          const secret = await h.store.cursorSecret();

          await h.reopen();
          await h.reopen();
          assert.deepEqual(await h.migrationRows(), first, 'same rows, same applied_at');
          // Re-running the first migration would have failed on CREATE TABLE or replaced the secret.
          assert.deepEqual(await h.store.getPet(pet.id), pet);
          assert.equal(await h.store.cursorSecret(), secret);
        }));
    });

    describe('api keys', () => {
      test('createKey returns the key with its fields, a creation time and no revocation', (t) =>
        withStore(t, async ({ store }) => {
          const input = newKey({ environment: 'staging', plan: 'enterprise', perMinute: 5000, perDay: 2_000_000, label: 'ci' });
          const before = Date.now();
          const key = await store.createKey(input);
          const after = Date.now();
          assert.deepEqual(
            { ...key, createdAt: undefined },
            {
              id: input.id,
              prefix: input.prefix,
              environment: 'staging',
              plan: 'enterprise',
              perMinute: 5000,
              perDay: 2_000_000,
              label: 'ci',
              revokedAt: null,
              expiresAt: null,
              createdAt: undefined,
              subjectId: input.id,
            },
          );
          assert.ok(key.createdAt instanceof Date);
          assert.ok(key.createdAt.getTime() >= before && key.createdAt.getTime() <= after);
          assert.equal('hash' in key, false, 'the stored hash is not part of ApiKey');
        }));

      test('a key created with a subject keeps it; one created without is its own subject', (t) =>
        withStore(t, async ({ store }) => {
          const first = await store.createKey(newKey());
          const second = await store.createKey(newKey({ subjectId: first.subjectId }));
          const third = await store.createKey(newKey({ subjectId: second.subjectId }));
          assert.deepEqual(
            [first, second, third].map((k) => k.subjectId),
            [first.id, first.id, first.id],
          );
          const listed = await store.listKeys();
          assert.deepEqual(
            [first, second, third].map((k) => listed.find((l) => l.id === k.id)?.subjectId),
            [first.id, first.id, first.id],
          );
          assert.equal((await store.findKeyByHash(third.id.slice(4).repeat(16)))?.subjectId, first.id);
          // The subject is an existing key: the database refuses one that is not.
          await assert.rejects(store.createKey(newKey({ subjectId: 'key_does_not_exist' })));
        }));

      test('findKeyByHash returns the created key', (t) =>
        withStore(t, async ({ store }) => {
          const input = newKey();
          const key = await store.createKey(input);
          await store.createKey(newKey());
          assert.deepEqual(await store.findKeyByHash(input.hash), key);
        }));

      test('findKeyByHash of an unknown hash is undefined', (t) =>
        withStore(t, async ({ store }) => {
          assert.equal(await store.findKeyByHash('f'.repeat(64)), undefined);
          await store.createKey(newKey());
          assert.equal(await store.findKeyByHash('f'.repeat(64)), undefined);
          assert.equal(await store.findKeyByHash(''), undefined);
        }));

      test("untaggedKeyHashes lists the hashes of the environment's keys without a tag that are not revoked, expired ones included", (t) =>
        withStore(t, async ({ store }) => {
          assert.deepEqual(await store.untaggedKeyHashes('production'), []);
          const untagged = newKey({ tagged: false });
          await store.createKey(untagged);
          await store.createKey(newKey({ tagged: true }));
          await store.createKey(newKey({ tagged: false, environment: 'staging' }));
          const revoked = await store.createKey(newKey({ tagged: false }));
          assert.ok(await store.revokeKey(revoked.id));
          // An expired key can be given a new expiry (keys expire --never): it may authenticate again.
          const expired = newKey({ tagged: false });
          await store.updateKey((await store.createKey(expired)).id, { expiresAtMs: Date.now() - 1000 });
          assert.deepEqual((await store.untaggedKeyHashes('production')).sort(), [untagged.hash, expired.hash].sort());
        }));

      test('hasUsableKey: a key of the environment neither revoked nor expired at that moment', (t) =>
        withStore(t, async ({ store }) => {
          const now = Date.now();
          assert.equal(await store.hasUsableKey('production', now), false, 'no keys');
          await store.createKey(newKey({ environment: 'staging' }));
          assert.equal(await store.hasUsableKey('production', now), false, "another environment's key");
          const revoked = await store.createKey(newKey());
          assert.ok(await store.revokeKey(revoked.id));
          const expiring = await store.createKey(newKey());
          await store.updateKey(expiring.id, { expiresAtMs: now + 60_000 });
          assert.equal(await store.hasUsableKey('production', now), true, 'one that expires later');
          assert.equal(await store.hasUsableKey('production', now + 60_000), false, 'expired at its expiry; the other is revoked');
          assert.equal(await store.hasUsableKey('staging', now + 60_000), true);
        }));

      test('listKeys lists every key', (t) =>
        withStore(t, async ({ store }) => {
          assert.deepEqual(await store.listKeys(), []);
          const created = [
            await store.createKey(newKey()),
            await store.createKey(newKey({ label: 'two' })),
            await store.createKey(newKey()),
          ];
          const listed = await store.listKeys();
          assert.equal(listed.length, 3);
          assert.deepEqual([...listed].sort(byId), [...created].sort(byId));
        }));

      test('updateKey changes only what it is given, sets and clears an expiry, and ignores unknown ids', (t) =>
        withStore(t, async ({ store }) => {
          const key = await store.createKey(newKey());
          assert.equal(key.expiresAt, null);
          const replanned = (await store.updateKey(key.id, { plan: 'enterprise', perMinute: 5000, perDay: 90_000 }))!;
          assert.deepEqual(
            [replanned.plan, replanned.perMinute, replanned.perDay, replanned.expiresAt],
            ['enterprise', 5000, 90_000, null],
          );
          const dated = (await store.updateKey(key.id, { expiresAtMs: 1_900_000_000_000 }))!;
          assert.deepEqual([dated.plan, dated.expiresAt?.getTime()], ['enterprise', 1_900_000_000_000]);
          const found = (await store.findKeyByHash(key.id.slice(4).repeat(16)))!;
          assert.equal(found?.expiresAt?.getTime(), 1_900_000_000_000);
          assert.equal((await store.updateKey(key.id, { expiresAtMs: null }))!.expiresAt, null);
          assert.equal(await store.updateKey('key_0000000000000000', { plan: 'pro' }), undefined);
        }));

      test('revokeKey returns true once, then false', (t) =>
        withStore(t, async ({ store }) => {
          const key = await store.createKey(newKey());
          assert.equal(await store.revokeKey(key.id), true);
          assert.equal(await store.revokeKey(key.id), false);
        }));

      test('a revoked key is still found, with revokedAt set', (t) =>
        withStore(t, async ({ store }) => {
          const input = newKey();
          const key = await store.createKey(input);
          const other = await store.createKey(newKey());
          const before = Date.now();
          await store.revokeKey(key.id);
          const after = Date.now();
          const found = await store.findKeyByHash(input.hash);
          assert.ok(found?.revokedAt instanceof Date);
          assert.ok(found.revokedAt.getTime() >= before && found.revokedAt.getTime() <= after);
          assert.deepEqual({ ...found, revokedAt: null }, key);
          const listed = await store.listKeys();
          assert.ok(listed.find((k) => k.id === key.id)?.revokedAt instanceof Date);
          assert.deepEqual(
            listed.find((k) => k.id === other.id),
            other,
            'other keys are untouched',
          );
        }));

      test('revoking a second time keeps the first revocation time', (t) =>
        withStore(t, async ({ store }) => {
          const input = newKey();
          await store.createKey(input);
          await store.revokeKey(input.id);
          const first = (await store.findKeyByHash(input.hash))?.revokedAt;
          await new Promise((r) => setTimeout(r, 5));
          await store.revokeKey(input.id);
          assert.deepEqual((await store.findKeyByHash(input.hash))?.revokedAt, first);
        }));

      test('revokeKey of an unknown id is false', (t) =>
        withStore(t, async ({ store }) => {
          assert.equal(await store.revokeKey('key_does_not_exist'), false);
        }));
    });

    describe('bans', () => {
      const now = Date.UTC(2026, 10, 22, 12, 0, 0);

      test('banKey then banEndOf before the end returns the end', (t) =>
        withStore(t, async ({ store }) => {
          const key = await store.createKey(newKey());
          await store.banKey(key.id, now + 60_000);
          assert.equal(await store.banEndOf(key.id, now), now + 60_000);
          assert.equal(await store.banEndOf(key.id, now + 59_999), now + 60_000);
        }));

      test('banEndOf at or after the end is undefined', (t) =>
        withStore(t, async ({ store }) => {
          const key = await store.createKey(newKey());
          await store.banKey(key.id, now + 60_000);
          assert.equal(await store.banEndOf(key.id, now + 60_000), undefined);
          assert.equal(await store.banEndOf(key.id, now + 120_000), undefined);
        }));

      test('banEndOf of a key without a ban is undefined', (t) =>
        withStore(t, async ({ store }) => {
          const key = await store.createKey(newKey());
          assert.equal(await store.banEndOf(key.id, now), undefined);
          assert.equal(await store.banEndOf('key_unknown', now), undefined);
        }));

      test('banKey again replaces the earlier ban, later or earlier', (t) =>
        withStore(t, async ({ store }) => {
          const key = await store.createKey(newKey());
          await store.banKey(key.id, now + 60_000);
          await store.banKey(key.id, now + 600_000);
          assert.equal(await store.banEndOf(key.id, now), now + 600_000);
          await store.banKey(key.id, now + 1_000);
          assert.equal(await store.banEndOf(key.id, now), now + 1_000);
          assert.equal((await store.listBans(now)).length, 1);
        }));

      test('listBans lists only bans still active at that moment', (t) =>
        withStore(t, async ({ store }) => {
          const a = await store.createKey(newKey());
          const b = await store.createKey(newKey());
          const c = await store.createKey(newKey());
          await store.createKey(newKey()); // never banned
          await store.banKey(a.id, now + 60_000);
          await store.banKey(b.id, now - 1); // already over
          await store.banKey(c.id, now + 1_000);
          const active = await store.listBans(now);
          assert.deepEqual(
            [...active].sort((x, y) => (x.keyId < y.keyId ? -1 : 1)),
            [
              { keyId: a.id, bannedUntil: new Date(now + 60_000) },
              { keyId: c.id, bannedUntil: new Date(now + 1_000) },
            ].sort((x, y) => (x.keyId < y.keyId ? -1 : 1)),
          );
          assert.deepEqual(await store.listBans(now + 1_000), [{ keyId: a.id, bannedUntil: new Date(now + 60_000) }]);
          assert.deepEqual(await store.listBans(now + 60_000), []);
        }));

      test('liftBan returns true for a banned key, then false', (t) =>
        withStore(t, async ({ store }) => {
          const key = await store.createKey(newKey());
          await store.banKey(key.id, now + 60_000);
          assert.equal(await store.liftBan(key.id, now), true);
          assert.equal(await store.banEndOf(key.id, now), undefined);
          assert.deepEqual(await store.listBans(now), []);
          assert.equal(await store.liftBan(key.id, now), false);
          assert.equal(await store.liftBan('key_unknown', now), false);
        }));

      test('liftBan of a ban that has already ended removes it and returns false', (t) =>
        withStore(t, async ({ store }) => {
          const key = await store.createKey(newKey());
          await store.banKey(key.id, now + 60_000);
          assert.equal(await store.liftBan(key.id, now + 60_000), false);
          assert.equal(await store.banEndOf(key.id, now), undefined);
        }));
    });

    describe('idempotency claims', () => {
      const t0 = Date.UTC(2026, 10, 22, 12, 0, 0);
      const DAY = 86_400_000;
      const STALE = 5_000;
      const scope = { keyId: 'key_idem', idempotencyKey: 'create-1' };
      const claim = (store: Store, hash: string, nowMs: number, key = scope) =>
        store.claimIdempotencyKey(key, hash, nowMs, nowMs - DAY, STALE);
      /** A claim that must be won: its fencing token. */
      const won = async (store: Store, hash: string, nowMs: number, key = scope): Promise<string> => {
        const c = await claim(store, hash, nowMs, key);
        assert.equal(c.state, 'claimed', JSON.stringify(c));
        return (c as { token: string }).token;
      };
      const petCount = async (store: Store) => (await store.listPets({ status: undefined, afterId: undefined, limit: 10 })).length;

      test('the first claim of a key wins; while it is unfinished the same request is in flight and another one a mismatch', (t) =>
        withStore(t, async ({ store }) => {
          const first = await claim(store, 'h1', t0);
          assert.equal(first.state, 'claimed');
          assert.match((first as { token: string }).token, /^[\w-]{16,}$/);
          assert.deepEqual(await claim(store, 'h1', t0 + STALE - 1), { state: 'in_flight', staleAtMs: t0 + STALE });
          assert.deepEqual(await claim(store, 'h2', t0 + STALE - 1), { state: 'mismatch' });
          const theirs = { keyId: 'key_other', idempotencyKey: 'create-1' };
          const other = await won(store, 'h1', t0, theirs);
          assert.notEqual(other, (first as { token: string }).token, 'every claim has a token of its own');
        }));

      test('a finished claim resolves to the created pet, exactly, and survives a reopen', (t) =>
        withStore(t, async (h) => {
          const token = await won(h.store, 'h1', t0);
          const pet = await h.store.createPetIdempotently(
            scope,
            token,
            newPet('Once', { categoryId: 9223372036854775807n, status: 'pending' }),
          );
          assert.deepEqual(pet, { id: 1n, name: 'Once', categoryId: 9223372036854775807n, status: 'pending' } satisfies Pet);
          assert.deepEqual(await h.store.getPet(pet.id), pet);
          assert.deepEqual(await claim(h.store, 'h1', t0 + 1000), { state: 'done', pet });
          assert.deepEqual(await claim(h.store, 'h2', t0 + 1000), { state: 'mismatch' });
          const store = await h.reopen();
          assert.deepEqual(await claim(store, 'h1', t0 + DAY - 1), { state: 'done', pet }, 'finished: never stale within its window');
          assert.equal(await petCount(store), 1);
        }));

      test('an unfinished claim older than the stale age is taken over, by any request, with a new token', (t) =>
        withStore(t, async ({ store }) => {
          const first = await won(store, 'h1', t0);
          const second = await won(store, 'h2', t0 + STALE);
          assert.notEqual(second, first);
          assert.deepEqual(
            await claim(store, 'h2', t0 + STALE + 1),
            { state: 'in_flight', staleAtMs: t0 + 2 * STALE },
            'the new claimant holds it now',
          );
          assert.deepEqual(await claim(store, 'h1', t0 + STALE + 1), { state: 'mismatch' });
        }));

      test('fencing: a create whose claim was taken over makes nothing, before or after the new claimant creates', (t) =>
        withStore(t, async ({ store }) => {
          const first = await won(store, 'h', t0);
          const second = await won(store, 'h', t0 + STALE);
          assert.equal(await store.createPetIdempotently(scope, first, newPet('Late')), undefined, 'taken over: nothing');
          assert.equal(await petCount(store), 0);
          const pet = await store.createPetIdempotently(scope, second, newPet('Taker'));
          assert.equal(pet?.name, 'Taker');
          assert.equal(await store.createPetIdempotently(scope, first, newPet('Later')), undefined, 'finished by another: nothing');
          assert.equal(await store.createPetIdempotently(scope, second, newPet('Twice')), undefined, 'finished: never a second pet');
          assert.deepEqual(await claim(store, 'h', t0 + STALE + 1), { state: 'done', pet });
          assert.deepEqual(await store.listPets({ status: undefined, afterId: undefined, limit: 10 }), [pet]);
          // A create that made nothing drew no id: the next pet takes the one after the taker's.
          assert.equal((await store.createPet(newPet('Next'))).id, pet!.id + 1n);
        }));

      test('fencing: a create whose claim was released, expired or never made makes nothing', (t) =>
        withStore(t, async ({ store }) => {
          const token = await won(store, 'h', t0);
          await store.releaseIdempotencyKey(scope, token);
          assert.equal(await store.createPetIdempotently(scope, token, newPet('Released')), undefined);
          const again = await won(store, 'h', t0 + 1);
          assert.equal(
            await store.createPetIdempotently(scope, token, newPet('Old token')),
            undefined,
            'a claim made anew has a new token',
          );
          assert.equal(await store.purgeIdempotencyKeys(t0 + 1), 1);
          assert.equal(await store.createPetIdempotently(scope, again, newPet('Purged')), undefined);
          assert.equal(await store.createPetIdempotently({ ...scope, idempotencyKey: 'never' }, again, newPet('Never')), undefined);
          assert.equal(await petCount(store), 0);
        }));

      test('claims expire after their window, finished or not', (t) =>
        withStore(t, async ({ store }) => {
          await store.createPetIdempotently(scope, await won(store, 'h1', t0), newPet('Expiring'));
          const pet = await store.createPetIdempotently(scope, await won(store, 'h2', t0 + DAY), newPet('Again'));
          assert.equal(pet?.id, 2n);
          assert.deepEqual(await claim(store, 'h2', t0 + DAY + 1), { state: 'done', pet });
        }));

      test('release frees an unfinished claim with its token only, and leaves a finished one', (t) =>
        withStore(t, async ({ store }) => {
          const first = await won(store, 'h1', t0);
          await store.releaseIdempotencyKey(scope, 'another-token');
          assert.deepEqual(
            await claim(store, 'h1', t0 + 1),
            { state: 'in_flight', staleAtMs: t0 + STALE },
            'another token releases nothing',
          );
          await store.releaseIdempotencyKey(scope, first);
          const second = await won(store, 'h2', t0 + 1);
          // The first request's release, late, after another took the key: the new claim stays.
          await store.releaseIdempotencyKey(scope, first);
          assert.deepEqual(await claim(store, 'h2', t0 + 2), { state: 'in_flight', staleAtMs: t0 + 1 + STALE });
          const pet = await store.createPetIdempotently(scope, second, newPet('Kept'));
          await store.releaseIdempotencyKey(scope, second);
          assert.deepEqual(await claim(store, 'h2', t0 + 2), { state: 'done', pet });
          await store.releaseIdempotencyKey({ keyId: 'key_idem', idempotencyKey: 'never-claimed' }, second);
        }));

      test('find reads a claim without claiming or taking over', (t) =>
        withStore(t, async ({ store }) => {
          assert.equal(await store.findIdempotencyKey(scope, 'h1', STALE), undefined);
          assert.equal(await store.findIdempotencyKey(scope, 'h1', STALE), undefined, 'nothing was claimed by looking');
          const token = await won(store, 'h1', t0);
          assert.deepEqual(
            await store.findIdempotencyKey(scope, 'h1', STALE),
            { state: 'in_flight', staleAtMs: t0 + STALE },
            'however old',
          );
          assert.deepEqual(await store.findIdempotencyKey(scope, 'h2', STALE), { state: 'mismatch' });
          const pet = await store.createPetIdempotently(scope, token, newPet('Found'));
          assert.deepEqual(await store.findIdempotencyKey(scope, 'h1', STALE), { state: 'done', pet });
          assert.deepEqual(await store.findIdempotencyKey(scope, 'h2', STALE), { state: 'mismatch' });
        }));

      test('purge deletes the claims made at or before a moment and counts them', (t) =>
        withStore(t, async ({ store }) => {
          const key = (idempotencyKey: string) => ({ keyId: 'key_idem', idempotencyKey });
          await claim(store, 'h', t0, key('a'));
          await store.createPetIdempotently(key('b'), await won(store, 'h', t0 + 10, key('b')), newPet('b'));
          await claim(store, 'h', t0 + 20, key('c'));
          assert.equal(await store.purgeIdempotencyKeys(t0 - 1), 0);
          assert.equal(await store.purgeIdempotencyKeys(t0 + 10), 2);
          assert.equal(await store.purgeIdempotencyKeys(t0 + 10), 0);
          assert.equal((await claim(store, 'other', t0 + 30, key('b'))).state, 'claimed', 'nothing of the purged claim is left');
          assert.deepEqual(await claim(store, 'other', t0 + 30, key('c')), { state: 'mismatch' });
          assert.equal(await petCount(store), 1, 'purging keeps the pets');
        }));
    });

    describe('instance', () => {
      test('cursorSecret is a non-empty string', (t) =>
        withStore(t, async ({ store }) => {
          const secret = await store.cursorSecret();
          assert.equal(typeof secret, 'string');
          assert.ok(secret.length > 0);
          assert.equal(await store.cursorSecret(), secret);
        }));

      test('cursorSecret is the same after a reopen and differs between databases', async (t) => {
        await withStore(t, async (h) => {
          const secret = await h.store.cursorSecret();
          assert.equal(await (await h.reopen()).cursorSecret(), secret);
          await withStore(t, async (other) => {
            assert.notEqual(await other.store.cursorSecret(), secret);
          });
        });
      });

      test('ping resolves', (t) =>
        withStore(t, async ({ store }) => {
          assert.equal(await store.ping(), undefined);
        }));
    });
  });
}

for (const engine of ENGINES) {
  storageContract(engine.name, engine.open);
  engine.extra?.(engine.open);
}
