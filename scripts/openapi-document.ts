/**
 * The OpenAPI document as the route schemas generate it: `npm run openapi` writes it to openapi.json,
 * and test/http/openapi.test.ts fails while the committed file differs. Both go through this one function,
 * so the test checks exactly what the script writes.
 */
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { renderOpenApi } from '../src/http/contract/openapi.ts';
import { MemoryRateLimiter } from '../src/limits/memory.ts';
import { openSqliteStore } from '../src/storage/sqlite/store.ts';

export async function generateOpenApiDocument(): Promise<string> {
  const store = openSqliteStore({ path: ':memory:', synchronous: 'normal' });
  const app = await buildApp(
    { ...loadConfig({}), logLevel: 'silent' }, // the defaults: the document does not depend on configuration
    { store, limiter: new MemoryRateLimiter(), describeRoutes: true },
  );
  try {
    await app.ready();
    return renderOpenApi(app);
  } finally {
    await app.close();
    await store.close();
  }
}
