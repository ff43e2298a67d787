/** The one mapping from database rows to domain objects, shared by every engine. */
import type { ApiKey, Environment } from '../domain/api-key.ts';
import type { Pet, PetStatus } from '../domain/pet.ts';
import type { Plan } from '../domain/plans.ts';

export interface PetRow {
  id: bigint | string;
  name: string;
  category_id: bigint | string;
  status: string;
}

export function toPet(row: PetRow): Pet {
  return {
    id: BigInt(row.id),
    name: row.name,
    categoryId: BigInt(row.category_id),
    status: row.status as PetStatus,
  };
}

export interface ApiKeyRow {
  id: string;
  prefix: string;
  environment: string;
  plan: string;
  per_minute: number | bigint | string;
  per_day: number | bigint | string;
  label: string | null;
  created_at: number | bigint | string | Date;
  revoked_at: number | bigint | string | Date | null;
  expires_at: number | bigint | string | null;
  /** NULL: the key is its own subject (every key not made by rotation). */
  subject_id: string | null;
}

const toDate = (v: number | bigint | string | Date): Date => (v instanceof Date ? v : new Date(Number(v)));

export function toApiKey(row: ApiKeyRow): ApiKey {
  return {
    id: row.id,
    prefix: row.prefix,
    environment: row.environment as Environment,
    plan: row.plan as Plan,
    perMinute: Number(row.per_minute),
    perDay: Number(row.per_day),
    label: row.label,
    createdAt: toDate(row.created_at),
    revokedAt: row.revoked_at === null ? null : toDate(row.revoked_at),
    expiresAt: row.expires_at === null || row.expires_at === undefined ? null : toDate(row.expires_at),
    subjectId: row.subject_id ?? row.id,
  };
}
