// axios: the answer kept as text and parsed with parseExact, the body written with stringifyExact.
import axios from 'axios';
import { parseExact, stringifyExact } from './int64-json.mjs';

const api = axios.create({
  baseURL: `${process.env.PETSTORE_URL}/v1`,
  headers: { authorization: `Bearer ${process.env.PETSTORE_KEY}` },
  responseType: 'text',
  transformRequest: [
    (body, headers) => {
      if (body === undefined) return body;
      headers.setContentType('application/json');
      return stringifyExact(body);
    },
  ],
  transformResponse: [(text) => (text ? parseExact(text) : text)],
});

for (const categoryId of [9007199254740993n, 9223372036854775807n]) {
  const { data: created } = await api.post('/pets', { name: 'Max', categoryId });
  const { data: read } = await api.get(`/pets/${created.id}`);
  console.log(created.categoryId, read.categoryId);
}
