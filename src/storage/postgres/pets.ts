/**
 * Pets on PostgreSQL: creates, lookups and keyset pages, each a named (prepared) statement. Pets are
 * never deleted: a create whose outcome was lost with the connection may have committed, and stays if
 * it did (the client was told so; an Idempotency-Key is the way to be sure, see idempotency.ts).
 */
import { randomUUID } from 'node:crypto';
import type { NewPet, Pet } from '../../domain/pet.ts';
import { CreateOutcomeUnknownError, StorageUnavailableError } from '../errors.ts';
import { toPet, type PetRow } from '../rows.ts';
import type { ListPetsQuery, PetPageJson, PetStore } from '../store.ts';
import { GroupInsert } from './group-insert.ts';
import type { Query } from './query.ts';

export const PET_COLUMNS = 'id, name, category_id, status';

/*
 * One row per page: the page as petsJson's text (domain/pet-json.ts; to_json escapes names as
 * JSON.stringify does, ids are exact int8 text), the id of its last pet when full, and whether one
 * more pet exists. $1 is the position and $2 the limit; one extra row is read to learn whether a
 * next page exists.
 */
interface PageRow {
  json: string;
  last_id: string | null;
  n: number;
}
const pageSql = (where: string) => `
  WITH page AS (
    SELECT id, name, category_id, status, row_number() OVER (ORDER BY id) AS rn
    FROM (SELECT ${PET_COLUMNS} FROM pets WHERE ${where} ORDER BY id LIMIT $2::int + 1) p
  )
  SELECT '[' || coalesce(string_agg(
           '{"id":' || id || ',"name":' || to_json(name)::text || ',"categoryId":' || category_id
           || ',"status":"' || status || '"}', ',' ORDER BY id) FILTER (WHERE rn <= $2::int), '') || ']' AS json,
         (max(id) FILTER (WHERE rn = $2::int))::text AS last_id,
         count(*)::int AS n
  FROM page`;

/** A connection that was never made: refused, or not had from the pool or the server in time. */
function neverConnected(cause: unknown): boolean {
  const e = cause as { code?: string; message?: string };
  if (e.code === 'ECONNREFUSED' || e.code === 'ENOTFOUND' || e.code === 'EHOSTUNREACH') return true;
  if (e.code === '57P03' || e.code === '53300') return true; // starting up, too many connections: refused at login
  return /when trying to connect|due to connection timeout/i.test(e.message ?? '');
}

/**
 * A create's failure as its caller must see it: once the statement may have reached the database,
 * a lost connection or a timeout leaves its outcome unknown (the statement may still commit, even
 * after the client gave up); a connection never made sent nothing.
 */
export function createFailure(err: unknown): unknown {
  if (!(err instanceof StorageUnavailableError) || neverConnected(err.cause)) return err;
  return new CreateOutcomeUnknownError(err.cause);
}

export function postgresPets(query: Query): PetStore {
  const creates = new GroupInsert(query, createFailure);
  return {
    fullPagesAreFinal: false,

    async createPet(pet: NewPet): Promise<Pet> {
      return toPet(await creates.add(pet, randomUUID()));
    },

    async getPet(id: bigint): Promise<Pet | undefined> {
      const [row] = await query<PetRow>(`SELECT ${PET_COLUMNS} FROM pets WHERE id = $1`, [id.toString()], 'get-pet');
      return row && toPet(row);
    },

    async listPets({ status, afterId, limit }: ListPetsQuery): Promise<Pet[]> {
      const after = (afterId ?? 0n).toString();
      const rows = status
        ? await query<PetRow>(
            `SELECT ${PET_COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`,
            [status, after, limit],
            'list-by-status',
          )
        : await query<PetRow>(`SELECT ${PET_COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`, [after, limit], 'list-all');
      return rows.map(toPet);
    },

    async listPetsJson({ status, afterId, limit }: ListPetsQuery): Promise<PetPageJson> {
      const after = (afterId ?? 0n).toString();
      const [row] = status
        ? await query<PageRow>(pageSql('status = $3 AND id > $1'), [after, limit, status], 'list-json-by-status')
        : await query<PageRow>(pageSql('id > $1'), [after, limit], 'list-json-all');
      return { json: row!.json, lastId: row!.last_id === null ? undefined : BigInt(row!.last_id), more: row!.n > limit };
    },
  };
}
