/** Regenerates the committed openapi.json from the route schemas: `npm run openapi`. */
import { writeFileSync } from 'node:fs';
import { buildApp } from '../src/app.js';
import { renderOpenApi } from '../src/http/openapi.js';
import { MemoryRateLimiter } from '../src/limits/memory.js';
import { openSqliteStore } from '../src/storage/sqlite/store.js';

const store = openSqliteStore({ path: ':memory:', synchronous: 'normal' });
const app = await buildApp(
  { environment: 'production', logLevel: 'silent', trustProxy: false, keyCacheTtlMs: 2000, anonymousPerMinute: 60, banThreshold: 20, banDurationSeconds: 900 },
  { store, limiter: new MemoryRateLimiter() },
);
await app.ready();
writeFileSync(new URL('../openapi.json', import.meta.url), renderOpenApi(app));
await app.close();
await store.close();
console.log('wrote openapi.json');
