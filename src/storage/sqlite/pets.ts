/**
 * Pets on SQLite: the single-row insert (which group commits and idempotent creates run inside their
 * transactions), lookups and keyset pages, each statement prepared once.
 */
import type { NewPet, Pet } from '../../domain/pet.ts';
import { toPet, type PetRow } from '../rows.ts';
import type { ListPetsQuery, PetStore } from '../store.ts';
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

export function sqlitePets(db: Database, commits: GroupCommit): PetStore {
  const selectPet = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE id = ?'));
  const listAll = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE id > ? ORDER BY id LIMIT ?'));
  const listByStatus = exact(db.prepare('SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?'));
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
  };
}
