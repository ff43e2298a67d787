/**
 * The configuration table of docs/configuration.md and the file .env.example, both written from the table in
 * src/config.ts: `npm run docs:config` puts the table between the two markers and rewrites .env.example, and
 * test/units/config.test.ts fails while either differs.
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

/** Where the example settings file is: the project's root, beside the `.env` it is copied to. */
export const ENV_EXAMPLE = new URL('../.env.example', import.meta.url);

/** Markdown as a comment reads it: code spans and links without their marks. */
const plain = (markdown: string) => markdown.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replaceAll('`', '');

/** Words wrapped into comment lines of at most `width` characters. */
function commentLines(text: string, width = 100): string[] {
  const lines: string[] = [];
  let line = '#';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line.length + 1 + word.length > width && line !== '#') {
      lines.push(line);
      line = '#';
    }
    line += ` ${word}`;
  }
  if (line !== '#') lines.push(line);
  return lines;
}

/**
 * .env.example: every setting, commented out at its default (empty where it has none), under what it means and
 * accepts. Copied to `.env`, it changes nothing until a line is uncommented.
 */
export function envExample(): string {
  const head = [
    '# Settings of `petstore serve` and the `petstore` command (docs/configuration.md). Copy this file to .env in the',
    '# folder the command runs in and uncomment what you change: a variable set in the environment wins over .env.',
    '# Written by `npm run docs:config` from src/config.ts; edit it there.',
  ];
  const blocks = VARIABLES.map((v) => {
    const only = /^`([^`]*)`$/.exec(v.shownDefault);
    const value = only ? only[1]! : '';
    // A default that is no single value (a rule) is said in words, since the line below cannot hold it.
    const defaultWords = only || v.shownDefault === 'unset' ? '' : ` Default: ${plain(v.shownDefault)}.`;
    const about = commentLines(`${plain(v.description)} Accepted: ${plain(v.accepted)}.${defaultWords}`);
    return [...about, ...v.names.map((name) => `# ${name}=${value}`)].join('\n');
  });
  return `${[head.join('\n'), ...blocks].join('\n\n')}\n`;
}
