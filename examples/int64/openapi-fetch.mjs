// openapi-fetch: stringifyExact as the body serializer, and each answer read as text (parseAs) and
// parsed with parseExact. With openapi-typescript's types, generate them with --bigint (or map the
// int64 fields to bigint) so that the types say what the values are.
import createClient from 'openapi-fetch';
import { parseExact, stringifyExact } from './int64-json.mjs';

const client = createClient({
  baseUrl: `${process.env.PETSTORE_URL}/v1`,
  headers: { authorization: `Bearer ${process.env.PETSTORE_KEY}` },
  bodySerializer: stringifyExact,
});

for (const categoryId of [9007199254740993n, 9223372036854775807n]) {
  const created = parseExact((await client.POST('/pets', { body: { name: 'Max', categoryId }, parseAs: 'text' })).data);
  const { data } = await client.GET('/pets/{petId}', { params: { path: { petId: created.id } }, parseAs: 'text' });
  console.log(created.categoryId, parseExact(data).categoryId);
}
