/** The Pet resource and the rules product.md sets for it; no I/O here. */

export const PET_STATUSES = ['available', 'pending', 'sold'] as const;
export type PetStatus = (typeof PET_STATUSES)[number];
export const DEFAULT_PET_STATUS: PetStatus = 'available';

export const NAME_MAX_LENGTH = 100;

/** Largest int64. Ids and category ids are bigint so that the whole range survives a round trip. */
export const INT64_MAX = 9223372036854775807n;

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

export function isPositiveInt64(value: bigint): boolean {
  return value >= 1n && value <= INT64_MAX;
}

/** A positive int64 written in decimal digits, exactly; undefined for anything else. */
export function parsePositiveInt64(text: string): bigint | undefined {
  if (!/^[0-9]{1,25}$/.test(text)) return undefined;
  const value = BigInt(text);
  return isPositiveInt64(value) ? value : undefined;
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
