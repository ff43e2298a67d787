/** Rewrites the configuration table of docs/configuration.md from src/config.ts: `npm run docs:config`. */
import { readFileSync, writeFileSync } from 'node:fs';
import { CONFIG_DOC, withConfigTable } from './config-docs.ts';

const before = readFileSync(CONFIG_DOC, 'utf8');
const after = withConfigTable(before);
if (after === before) {
  console.log('docs/configuration.md: the configuration table is up to date');
} else {
  writeFileSync(CONFIG_DOC, after);
  console.log('docs/configuration.md: wrote the configuration table');
}
