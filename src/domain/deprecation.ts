/** Deprecation of getPet (GET /v1/pets/{petId}): RFC 9745 Deprecation and RFC 8594 Sunset. */

/** When getPet became deprecated: the release of interface version 1.0.0 (2026-11-01T00:00:00Z). */
export const GET_PET_DEPRECATED_AT_MS = Date.UTC(2026, 10, 1);
/** Removal announced for 5 December 2030; from this moment the operation answers 410. */
export const GET_PET_SUNSET_AT_MS = Date.UTC(2030, 11, 5);

export const GET_PET_DEPRECATION_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  Deprecation: `@${GET_PET_DEPRECATED_AT_MS / 1000}`,
  Sunset: new Date(GET_PET_SUNSET_AT_MS).toUTCString(),
  Link: '</v1/pets>; rel="successor-version", </docs#operation/getPet>; rel="deprecation"',
});

export function isGetPetSunset(nowMs: number): boolean {
  return nowMs >= GET_PET_SUNSET_AT_MS;
}
