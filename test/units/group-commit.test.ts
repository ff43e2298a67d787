/**
 * Group commit on SQLite: creates queued in one turn share a transaction, each caller learns its own
 * outcome, and closing the store commits what was accepted.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseSync } from '../../src/storage/sqlite/driver.ts';
import type { NewPet, Pet } from '../../src/domain/pet.ts';
import { GroupCommit } from '../../src/storage/sqlite/group-commit.ts';
import { openSqliteStore } from '../../src/storage/sqlite/store.ts';
import { WriteHealth } from '../../src/storage/sqlite/write-health.ts';
import { SqliteWriter } from '../../src/storage/sqlite/writer.ts';
import { atEnd, tempDir } from '../support/temp.ts';

test('concurrent creates commit together, each with its own id, and all are read back', async (t) => {
  const path = join(tempDir(t), 'pets.db');
  const store = openSqliteStore({ path, synchronous: 'full' });
  const created = await Promise.all(
    Array.from({ length: 50 }, (_, i) => store.createPet({ name: `pet ${i}`, categoryId: BigInt(i + 1), status: 'available' })),
  );
  assert.equal(new Set(created.map((p) => p.id)).size, 50);
  await store.close();
  const reopened = openSqliteStore({ path, synchronous: 'full' });
  for (const pet of created) assert.deepEqual(await reopened.getPet(pet.id), pet);
  await reopened.close();
});

test('one failing insert fails only its own create', async (t) => {
  const db = new DatabaseSync(join(tempDir(t), 'check.db'));
  atEnd(t, () => db.close());
  db.exec("CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT NOT NULL CHECK (name <> 'bad'))");
  const insert = db.prepare('INSERT INTO pets (name) VALUES (?) RETURNING id');
  insert.setReadBigInts(true);
  const commits = new GroupCommit(db, new SqliteWriter(db, 2000, new WriteHealth(undefined)), (pet: NewPet): Pet => {
    const { id } = insert.get(pet.name) as unknown as { id: bigint };
    return { id, ...pet };
  });
  const names = ['a', 'bad', 'c'];
  const outcomes = await Promise.allSettled(names.map((name) => commits.add({ name, categoryId: 1n, status: 'available' })));
  assert.deepEqual(
    outcomes.map((o) => o.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  assert.deepEqual(
    db
      .prepare('SELECT name FROM pets ORDER BY id')
      .all()
      .map((row) => row.name),
    ['a', 'c'],
  );
});

test('a failure to begin that is not a held lock refuses every waiting create at once, not at the end of the lock wait', async (t) => {
  const db = new DatabaseSync(join(tempDir(t), 'begin.db'));
  atEnd(t, () => db.close());
  db.exec('CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT NOT NULL)');
  const insert = db.prepare('INSERT INTO pets (name) VALUES (?) RETURNING id');
  insert.setReadBigInts(true);
  // A minute's lock wait: a create that waited it out would outlast the test's bound below.
  const commits = new GroupCommit(db, new SqliteWriter(db, 60_000, new WriteHealth(undefined)), (pet: NewPet): Pet => {
    const { id } = insert.get(pet.name) as unknown as { id: bigint };
    return { id, ...pet };
  });
  db.exec('BEGIN'); // the writer's BEGIN IMMEDIATE now fails at once, and not for a lock
  const settled = Promise.allSettled(['a', 'b', 'c'].map((name) => commits.add({ name, categoryId: 1n, status: 'available' })));
  const outcomes = await Promise.race([settled, sleep(10_000).then(() => 'still waiting' as const)]);
  assert.notEqual(outcomes, 'still waiting');
  assert.deepEqual(
    (outcomes as PromiseSettledResult<Pet>[]).map((o) => o.status),
    ['rejected', 'rejected', 'rejected'],
  );
  db.exec('ROLLBACK');
});

test('closing the store commits creates already accepted', async (t) => {
  const path = join(tempDir(t), 'pets.db');
  const store = openSqliteStore({ path, synchronous: 'normal' });
  const pending = store.createPet({ name: 'late', categoryId: 7n, status: 'sold' });
  await store.close(); // before the batch's turn came
  const pet = await pending;
  const reopened = openSqliteStore({ path, synchronous: 'normal' });
  assert.deepEqual(await reopened.getPet(pet.id), pet);
  await reopened.close();
});
