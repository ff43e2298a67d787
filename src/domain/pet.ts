/** The Pet resource and the rules product.md sets for it; no I/O here. Ids: int64.ts. */

export const PET_STATUSES = ['available', 'pending', 'sold'] as const;
export type PetStatus = (typeof PET_STATUSES)[number];
export const DEFAULT_PET_STATUS: PetStatus = 'available';

export const NAME_MAX_LENGTH = 100;

export interface Pet {
  id: bigint;
  name: string;
  categoryId: bigint;
  status: PetStatus;
}

export interface NewPet {
  name: string;
  categoryId: bigint;
  status: PetStatus;
}

/**
 * Problems with a name that JSON Schema cannot express. A NUL or an unpaired surrogate could not be
 * stored exactly (PostgreSQL refuses NUL, UTF-8 has no unpaired surrogates), so they are refused
 * rather than silently altered.
 */
export function nameProblem(name: string): string | undefined {
  if (!name.isWellFormed()) return 'must not contain unpaired UTF-16 surrogates';
  if (name.includes('\u0000')) return 'must not contain the NUL character';
  return undefined;
}
