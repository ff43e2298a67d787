/**
 * Text the CLI prints but did not write (labels, IDs, arguments), made safe for a terminal: controls, format
 * characters and line separators are printed as escapes (docs/cli.md, "Labels on a terminal"). Zero-width
 * (non-)joiners stay: scripts and emoji need them, and they move nothing.
 */

/** What is escaped on output and refused in a label; lone surrogates cannot be printed either. */
const UNSAFE = /[[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]--[\u200C\u200D]]/gv;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const hex = (code: number) => code.toString(16).padStart(4, '0');

/** `\n`, `\r`, `\t`, or `\u001b` (`\u{e0001}` beyond the first plane), as in a JavaScript string. */
function escapeOf(char: string): string {
  const code = char.codePointAt(0)!;
  return NAMED[char] ?? (code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${hex(code)}`);
}

/** The text with every unsafe character escaped; text without one is returned as it is. */
export function printable(text: string): string {
  return text.replace(UNSAFE, escapeOf);
}

/**
 * JSON as one line that is safe on a terminal too. JSON.stringify escapes C0 controls but leaves
 * DEL, C1 and format characters raw; inside a JSON string they are written as \u escapes, which
 * parse back to the same text.
 */
export function jsonLine(value: unknown): string {
  return JSON.stringify(value).replace(UNSAFE, (char) => char.replace(/[\s\S]/g, (unit) => `\\u${hex(unit.charCodeAt(0))}`));
}

/** The first unsafe character of the text, as U+XXXX, with its position counted in characters from 1. */
export function firstUnsafe(text: string): { codePoint: string; position: number } | undefined {
  const index = text.search(UNSAFE);
  if (index < 0) return undefined;
  const code = text.codePointAt(index)!;
  return { codePoint: `U+${code.toString(16).toUpperCase().padStart(4, '0')}`, position: [...text.slice(0, index)].length + 1 };
}
