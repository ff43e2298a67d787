/**
 * Pets on SQLite: the single-row insert (which group commits and idempotent creates run inside their
 * transactions), lookups and keyset pages, each statement prepared once.
 */
import type { NewPet, Pet } from '../../domain/pet.ts';
import { toPet, type PetRow } from '../rows.ts';
import type { ListPetsQuery, PetPageJson, PetStore } from '../store.ts';
import { exact, type Database } from './driver.ts';
import type { GroupCommit } from './group-commit.ts';

/** Inserts one pet, inside whatever transaction is open. */
export type InsertPet = (pet: NewPet) => Pet;

export function prepareInsertPet(db: Database): InsertPet {
  const insertPet = exact(
    db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id, name, category_id, status'),
  );
  return (pet) => toPet(insertPet.get(pet.name, pet.categoryId, pet.status) as unknown as PetRow);
}

/**
 * A page written as the response's JSON by SQLite itself, in one statement: the page's rows plus one
 * (which tells whether a next page exists), numbered, with the first `limit` of them aggregated in id
 * order. Reading 20 rows as objects with BigInt ids and serialising them again cost more than the
 * query (docs/decisions.md, "Pages are written as JSON by the database"). json_object writes the
 * text the route's serialiser would: the fields in this order, integers exact, names escaped alike.
 */
const pageSql = (where: string) => `
  SELECT '[' || coalesce(string_agg(
           json_object('id', id, 'name', name, 'categoryId', category_id, 'status', status), ',' ORDER BY id
         ) FILTER (WHERE rn <= :limit), '') || ']' AS json,
         max(id) FILTER (WHERE rn = :limit) AS last_id,
         count(*) AS n
  FROM (
    SELECT id, name, category_id, status, row_number() OVER (ORDER BY id) AS rn
    FROM (SELECT id, name, category_id, status FROM pets WHERE ${where} ORDER BY id LIMIT :limit + 1)
  )`;

interface PageRow {
  json: string;
  last_id: bigint | null;
  n: bigint;
}

export function sqlitePets(db: Database, commits: GroupCommit): PetStore {
  const selectPet = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE id = ?'));
  const listAll = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE id > ? ORDER BY id LIMIT ?'));
  const listByStatus = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?'));
  const pageAll = exact(db.prepare(pageSql('id > :after')));
  const pageByStatus = exact(db.prepare(pageSql('status = :status AND id > :after')));
  return {
    fullPagesAreFinal: true,

    createPet: (pet: NewPet): Promise<Pet> => commits.add(pet),

    async getPet(id: bigint): Promise<Pet | undefined> {
      const row = selectPet.get(id) as unknown as PetRow | undefined;
      return row && toPet(row);
    },

    async listPets({ status, afterId, limit }: ListPetsQuery): Promise<Pet[]> {
      const after = afterId ?? 0n;
      const rows = (status ? listByStatus.all(status, after, limit) : listAll.all(after, limit)) as unknown as PetRow[];
      return rows.map(toPet);
    },

    async listPetsJson({ status, afterId, limit }: ListPetsQuery): Promise<PetPageJson> {
      const after = afterId ?? 0n;
      const row = (status ? pageByStatus.get({ status, after, limit }) : pageAll.get({ after, limit })) as unknown as PageRow;
      return { json: row.json, lastId: row.last_id ?? undefined, more: row.n > BigInt(limit) };
    },
  };
}
