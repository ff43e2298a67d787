// Plain fetch: write the body with stringifyExact, read it with parseExact.
import { parseExact, stringifyExact } from './int64-json.mjs';

const base = `${process.env.PETSTORE_URL}/v1`;
const headers = { authorization: `Bearer ${process.env.PETSTORE_KEY}` };

for (const categoryId of [9007199254740993n, 9223372036854775807n]) {
  const res = await fetch(`${base}/pets`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: stringifyExact({ name: 'Max', categoryId }),
  });
  const created = parseExact(await res.text());
  const read = parseExact(await (await fetch(`${base}/pets/${created.id}`, { headers })).text());
  console.log(created.categoryId, read.categoryId); // 9007199254740993n 9007199254740993n, then 2^63 - 1 twice
}
