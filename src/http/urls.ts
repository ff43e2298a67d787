/** The service's fixed paths, and the URLs built from them, for whoever registers or links to them. */

/** Every operation is under this prefix. */
export const API_PREFIX = '/v1';

/** The documentation page, outside the API. */
export const DOCS_PATH = '/docs';

/** The documentation page of an API reached at apiBaseUrl: beside the API, under the same path prefix. */
export function docsUrlBeside(apiBaseUrl: string): string {
  return `${apiBaseUrl.slice(0, -API_PREFIX.length)}${DOCS_PATH}`;
}
