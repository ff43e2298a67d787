/**
 * The one mapping from a Pet to the JSON text the API answers with: `{"id","name","categoryId",
 * "status"}` in that order, ids as exact integer literals (a bigint never passes through a double),
 * the name escaped as JSON.stringify escapes it. Where a store writes pets' JSON itself for speed
 * (PetStore.listPetsJson), its text must be byte for byte this one; the storage contract suite
 * checks it on every engine, so an ETag does not depend on who wrote the body.
 */
import type { Pet } from './pet.ts';

export function petJson(pet: Pet): string {
  return `{"id":${pet.id},"name":${JSON.stringify(pet.name)},"categoryId":${pet.categoryId},"status":${JSON.stringify(pet.status)}}`;
}

/** A page of pets: the JSON array of their texts, in the order given. */
export function petsJson(pets: readonly Pet[]): string {
  return `[${pets.map(petJson).join(',')}]`;
}
