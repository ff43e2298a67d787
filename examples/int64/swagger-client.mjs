// swagger-client: the request body given already written by stringifyExact, and every answer parsed
// again from its text by parseExact in a response interceptor.
import SwaggerClient from 'swagger-client';
import { parseExact, stringifyExact } from './int64-json.mjs';

const base = `${process.env.PETSTORE_URL}/v1`;
const client = await SwaggerClient({
  url: `${base}/openapi.json`,
  authorizations: { bearerAuth: { value: process.env.PETSTORE_KEY } },
});
const exact = { server: base, responseInterceptor: (res) => Object.assign(res, { body: res.text ? parseExact(res.text) : res.body }) };

for (const categoryId of [9007199254740993n, 9223372036854775807n]) {
  const { body: created } = await client.apis.pets.createPet({}, { ...exact, requestBody: stringifyExact({ name: 'Max', categoryId }) });
  const { body: read } = await client.apis.pets.getPet({ petId: created.id }, exact);
  console.log(created.categoryId, read.categoryId);
}
