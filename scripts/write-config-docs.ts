/** Rewrites the configuration table of README.md from src/config.ts: `npm run docs:config`. */
import { readFileSync, writeFileSync } from 'node:fs';
import { withConfigTable } from './config-docs.ts';

const path = new URL('../README.md', import.meta.url);
const before = readFileSync(path, 'utf8');
const after = withConfigTable(before);
if (after === before) {
  console.log('README.md: the configuration table is up to date');
} else {
  writeFileSync(path, after);
  console.log('README.md: wrote the configuration table');
}
