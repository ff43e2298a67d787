/** Deprecation of getPet (GET /v1/pets/{petId}): RFC 9745 Deprecation and RFC 8594 Sunset. */

/** When getPet became deprecated: the release of interface version 1.0.0 (2026-11-01T00:00:00Z). */
export const GET_PET_DEPRECATED_AT_MS = Date.UTC(2026, 10, 1);
/** Removal announced for 5 December 2030; from this moment the operation answers 410. */
export const GET_PET_SUNSET_AT_MS = Date.UTC(2030, 11, 5);

/** The two fields that are the same wherever the service is deployed. */
export const GET_PET_DEPRECATION_HEADERS: Readonly<{ Deprecation: string; Sunset: string }> = Object.freeze({
  Deprecation: `@${GET_PET_DEPRECATED_AT_MS / 1000}`,
  Sunset: new Date(GET_PET_SUNSET_AT_MS).toUTCString(),
});

/**
 * Every deprecation field of a getPet answer. The Link names the replacement (listPets) and the
 * operation's documentation, both where clients reach the API: `apiBaseUrl` is PUBLIC_BASE_URL, and
 * the documentation sits beside it (`docsUrl`).
 */
export function getPetDeprecationHeaders(apiBaseUrl: string, docsUrl: string): Readonly<Record<string, string>> {
  return Object.freeze({
    ...GET_PET_DEPRECATION_HEADERS,
    Link: `<${apiBaseUrl}/pets>; rel="successor-version", <${docsUrl}#operation/getPet>; rel="deprecation"`,
  });
}

export function isGetPetSunset(nowMs: number): boolean {
  return nowMs >= GET_PET_SUNSET_AT_MS;
}
