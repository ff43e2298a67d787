// Plain fetch, no dependencies: create a pet with an Idempotency-Key, then read every page by
// following the Link header. Run: PETSTORE_URL=... PETSTORE_KEY=... node examples/fetch.mjs
const base = process.env.PETSTORE_URL;
const headers = { authorization: `Bearer ${process.env.PETSTORE_KEY}` };

const created = await fetch(`${base}/v1/pets`, {
  method: 'POST',
  headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
  body: JSON.stringify({ name: 'Marmalade', categoryId: 3 }),
});
if (created.status !== 201) throw new Error(`create failed: ${created.status} ${await created.text()}`);
console.log('created', await created.json());

let next = '/v1/pets?limit=2';
while (next) {
  const page = await fetch(base + next, { headers });
  if (!page.ok) throw new Error(`list failed: ${page.status} ${await page.text()}`);
  for (const pet of await page.json()) console.log(pet.id, pet.name, pet.status);
  console.log(`(${page.headers.get('x-ratelimit-remaining')} requests left this window)`);
  next = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')?.[1];
}
