/** Rewrites the configuration table of docs/configuration.md, and .env.example, from src/config.ts: `npm run docs:config`. */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { CONFIG_DOC, ENV_EXAMPLE, envExample, withConfigTable } from './config-docs.ts';

const before = readFileSync(CONFIG_DOC, 'utf8');
const after = withConfigTable(before);
if (after === before) {
  console.log('docs/configuration.md: the configuration table is up to date');
} else {
  writeFileSync(CONFIG_DOC, after);
  console.log('docs/configuration.md: wrote the configuration table');
}

const example = envExample();
if (existsSync(ENV_EXAMPLE) && readFileSync(ENV_EXAMPLE, 'utf8') === example) {
  console.log('.env.example: up to date');
} else {
  writeFileSync(ENV_EXAMPLE, example);
  console.log('.env.example: written');
}
