/**
 * The README's configuration table, written from the table in src/config.ts: `npm run docs:config`
 * puts it between the two markers, and test/config.test.ts fails while the README's copy differs.
 */
import { VARIABLES } from '../src/config.ts';

export const TABLE_START = '<!-- config-table: written by `npm run docs:config` from src/config.ts; edit it there -->';
export const TABLE_END = '<!-- /config-table -->';

/** A table cell: a pipe would end the cell early. */
const cell = (markdown: string) => markdown.replaceAll('|', '\\|');

export function configTable(): string {
  const rows = VARIABLES.map((v) => {
    const names = v.names.map((name) => `\`${name}\``).join(', ');
    return `| ${names} | ${cell(v.shownDefault)} | ${cell(v.accepted)} | ${cell(v.description)} |`;
  });
  return ['| Variable | Default | Accepted | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** The README with the text between the markers replaced by the table; throws when a marker is missing. */
export function withConfigTable(readme: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start === -1 || end < start) throw new Error(`README.md needs the lines ${TABLE_START} and ${TABLE_END}, in that order`);
  return `${readme.slice(0, start + TABLE_START.length)}\n${configTable()}\n${readme.slice(end)}`;
}
