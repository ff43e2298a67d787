/** Regenerates the committed openapi.json from the route schemas: `npm run openapi`. */
import { writeFileSync } from 'node:fs';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { renderOpenApi } from '../src/http/openapi.ts';
import { MemoryRateLimiter } from '../src/limits/memory.ts';
import { openSqliteStore } from '../src/storage/sqlite/store.ts';

const store = openSqliteStore({ path: ':memory:', synchronous: 'normal' });
const app = await buildApp(
  { ...loadConfig({}), logLevel: 'silent' }, // the defaults: the document does not depend on configuration
  { store, limiter: new MemoryRateLimiter(), describeRoutes: true },
);
await app.ready();
writeFileSync(new URL('../openapi.json', import.meta.url), renderOpenApi(app));
await app.close();
await store.close();
console.log('wrote openapi.json');
