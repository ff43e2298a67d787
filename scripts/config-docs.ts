/**
 * The configuration table of docs/configuration.md, written from the table in src/config.ts:
 * `npm run docs:config` puts it between the two markers, and test/units/config.test.ts fails while the
 * document's copy differs.
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

/** The document that holds the table. */
export const CONFIG_DOC = new URL('../docs/configuration.md', import.meta.url);

/** The document with the text between the markers replaced by the table; throws when a marker is missing. */
export function withConfigTable(doc: string): string {
  const start = doc.indexOf(TABLE_START);
  const end = doc.indexOf(TABLE_END);
  if (start === -1 || end < start) throw new Error(`docs/configuration.md needs the lines ${TABLE_START} and ${TABLE_END}, in that order`);
  return `${doc.slice(0, start + TABLE_START.length)}\n${configTable()}\n${doc.slice(end)}`;
}
