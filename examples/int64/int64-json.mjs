// JSON that keeps the int64 ids exact: `id` and `categoryId` are read as BigInt from the number's own
// digits (JSON.parse's third reviver argument), and a BigInt is written as its digits (JSON.rawJSON).
// Node.js 22+, Deno and Chromium-based browsers have both.
const INT64_FIELDS = new Set(['id', 'categoryId']);

export const parseExact = (text) =>
  JSON.parse(text, (key, value, context) => (INT64_FIELDS.has(key) && typeof value === 'number' ? BigInt(context.source) : value));

export const stringifyExact = (body) =>
  JSON.stringify(body, (_key, value) => (typeof value === 'bigint' ? JSON.rawJSON(String(value)) : value));
