/**
 * What `petstore --help` says about other documents holds: every environment variable a help text
 * names is one the configuration reads, every document it names exists, and the document it says
 * lists every variable does (docs/configuration.md, whose table test/units/config.test.ts holds to
 * src/config.ts).
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { COMMANDS, commandHelp, CONFIGURATION_DOC, GROUPS, groupHelp, mainHelp } from '../../src/cli/commands.ts';
import { CONFIG_VARIABLES } from '../../src/config.ts';

const ROOT = new URL('../../', import.meta.url);
const helps: [string, string][] = [
  ['petstore --help', mainHelp()],
  ...Object.keys(GROUPS).map((g): [string, string] => [`petstore ${g} --help`, groupHelp(g)]),
  ...COMMANDS.map((c): [string, string] => [`petstore ${c.name} --help`, commandHelp(c)]),
];

test('every variable a help text names is one the configuration reads, and is in docs/configuration.md', () => {
  const documented = readFileSync(new URL(CONFIGURATION_DOC, ROOT), 'utf8');
  for (const [where, text] of helps) {
    // Variables are upper case with an underscore (DATABASE_URL), or a one-word name of the table (PORT).
    const named = [...text.matchAll(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b[A-Z]{3,}\b/g)].map((m) => m[0]);
    for (const name of named.filter((n) => n.includes('_') || CONFIG_VARIABLES.includes(n))) {
      assert.ok(CONFIG_VARIABLES.includes(name), `${where} names ${name}, which the configuration does not read`);
      assert.ok(documented.includes(`\`${name}\``), `${where} names ${name}, which ${CONFIGURATION_DOC} does not list`);
    }
  }
});

test('every document a help text names exists, and the one said to list every variable lists them', () => {
  for (const [where, text] of helps) {
    for (const path of text.match(/\b[\w./-]+\.md\b/g) ?? []) assert.ok(existsSync(new URL(path, ROOT)), `${where} names ${path}`);
    assert.doesNotMatch(text, /README/, `${where}: the README lists no variables; name ${CONFIGURATION_DOC}`);
    if (/lists (them all|every variable)/.test(text))
      assert.match(text, new RegExp(`${CONFIGURATION_DOC} lists (them all|every variable)`), where);
  }
  const table = readFileSync(new URL(CONFIGURATION_DOC, ROOT), 'utf8');
  for (const name of CONFIG_VARIABLES)
    assert.ok(table.includes(`| \`${name}\``) || table.includes(`, \`${name}\` |`), `${CONFIGURATION_DOC} lacks ${name}`);
});
