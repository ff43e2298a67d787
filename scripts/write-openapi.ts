/** Regenerates the committed openapi.json from the route schemas: `npm run openapi`. */
import { writeFileSync } from 'node:fs';
import { generateOpenApiDocument } from './openapi-document.ts';

writeFileSync(new URL('../openapi.json', import.meta.url), await generateOpenApiDocument());
console.log('wrote openapi.json');
