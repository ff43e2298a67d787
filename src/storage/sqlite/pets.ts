/**
 * Pets on SQLite: the single-row insert (which group commits and idempotent creates run inside their
 * transactions), lookups and keyset pages, each statement prepared once.
 */
import { inDecimalOrder } from '../../domain/int64.ts';
import type { NewPet, Pet } from '../../domain/pet.ts';
import { toPet, type PetRow } from '../rows.ts';
import type { ListPetsQuery, PetPageJson, PetStore } from '../store.ts';
import { exact, type Database } from './driver.ts';
import type { GroupCommit } from './group-commit.ts';
import { PetJsonCache } from './pet-json-cache.ts';

/** Inserts one pet, inside whatever transaction is open. */
export type InsertPet = (pet: NewPet) => Pet;

export function prepareInsertPet(db: Database): InsertPet {
  // The stored pet is the one given with the id SQLite chose: the columns keep what they are given
  // (text, an integer), so reading the row back would return the same values. A RETURNING clause
  // did read it back, through a temporary table, and cost a third of the statement (BENCHMARKS.md).
  const insertPet = exact(db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)'));
  return (pet) => {
    const { lastInsertRowid } = insertPet.run(pet.name, pet.categoryId, pet.status);
    return { id: BigInt(lastInsertRowid), name: pet.name, categoryId: pet.categoryId, status: pet.status };
  };
}

/** How many pets' JSON a store keeps for assembling pages (pet-json-cache.ts). */
const PET_JSON_KEPT = 10_000;

/**
 * A page's ids, one more than `limit` (which tells whether a next page exists), as one decimal text:
 * an index-only read, with nothing per row for node:sqlite to turn into an object. The subquery picks
 * the ids; the aggregate has no ORDER BY of its own, which would sort them again in a temporary
 * B-tree and cost a third of the statement. SQLite does not promise the aggregate's order, so
 * inDecimalOrder checks it (the ids come in the subquery's order in practice).
 */
const pageIdsSql = (where: string) => `
  SELECT group_concat(id, ',') AS ids
  FROM (SELECT id FROM pets WHERE ${where} ORDER BY id LIMIT ? + 1)`;

/**
 * The JSON of pets named by a JSON array of ids, written by SQLite's json_object: petJson's text
 * (domain/pet-json.ts), the fields in its order, integers exact, names escaped alike.
 */
const PETS_JSON_SQL = `
  SELECT CAST(id AS TEXT) AS id, json_object('id', id, 'name', name, 'categoryId', category_id, 'status', status) AS json
  FROM pets WHERE id IN (SELECT value FROM json_each(?))`;

interface PageIdsRow {
  ids: string | null;
}

export function sqlitePets(db: Database, commits: GroupCommit): PetStore {
  const selectPet = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE id = ?'));
  const listAll = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE id > ? ORDER BY id LIMIT ?'));
  const listByStatus = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?'));
  // Positional parameters: binding an object by name cost a fifth of the statement.
  const pageIdsAll = db.prepare(pageIdsSql('id > ?'));
  const pageIdsByStatus = db.prepare(pageIdsSql('status = ? AND id > ?'));
  const petsJson = db.prepare(PETS_JSON_SQL);
  const petJson = new PetJsonCache(PET_JSON_KEPT);

  /**
   * A page written as the response's JSON: its ids from the index, each pet's text from the cache or,
   * for the pets not there, from one json_object statement. Reading rows as objects with BigInt ids
   * and serialising them again cost more than the query, and so did having SQLite aggregate the whole
   * page on every read (docs/decisions.md, "Pages are written as JSON by the database").
   */
  function pageJson(ids: string[], count: number): string {
    const parts: (string | undefined)[] = new Array(count);
    let missing: string[] | undefined;
    for (let i = 0; i < count; i++) {
      const json = petJson.get(ids[i]!);
      if (json === undefined) (missing ??= []).push(ids[i]!);
      parts[i] = json;
    }
    if (missing !== undefined) {
      const read = new Map<string, string>();
      for (const row of petsJson.all(`[${missing.join(',')}]`) as unknown as { id: string; json: string }[]) {
        read.set(row.id, row.json);
        petJson.set(row.id, row.json);
      }
      for (let i = 0; i < count; i++) parts[i] ??= read.get(ids[i]!);
    }
    return `[${parts.join(',')}]`;
  }

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
      const row = (status ? pageIdsByStatus.get(status, after, limit) : pageIdsAll.get(after, limit)) as unknown as PageIdsRow;
      const ids = row.ids === null ? [] : inDecimalOrder(row.ids.split(','));
      const count = Math.min(ids.length, limit);
      return { json: pageJson(ids, count), lastId: ids.length >= limit ? BigInt(ids[limit - 1]!) : undefined, more: ids.length > limit };
    },
  };
}
