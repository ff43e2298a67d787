// openapi-client-axios: the same axios settings as axios.mjs, given as the defaults of the client it
// builds from the served document; the operations are methods named by their operationId.
import { OpenAPIClientAxios } from 'openapi-client-axios';
import { parseExact, stringifyExact } from './int64-json.mjs';

const base = `${process.env.PETSTORE_URL}/v1`;
const api = new OpenAPIClientAxios({
  definition: `${base}/openapi.json`,
  withServer: { url: base },
  axiosConfigDefaults: {
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
  },
});
const client = await api.init();

for (const categoryId of [9007199254740993n, 9223372036854775807n]) {
  const { data: created } = await client.createPet(null, { name: 'Max', categoryId });
  const { data: read } = await client.getPet({ petId: created.id });
  console.log(created.categoryId, read.categoryId);
}
