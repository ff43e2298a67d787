/** The contract: the served OpenAPI document equals the committed one and states what clients see. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { ERROR_CODES } from '../src/http/api-error.ts';
import { call, startTestServer, type TestServer } from './support/servers.ts';

const committed = readFileSync(new URL('../openapi.json', import.meta.url), 'utf8');

describe('OpenAPI document', () => {
  let server: TestServer;
  let doc: any;
  before(async () => {
    server = await startTestServer();
    doc = (await call(server, 'GET', '/v1/openapi.json')).json;
  });
  after(() => server.close());

  test('the served document is byte for byte the committed openapi.json (run `npm run openapi` after a change)', async () => {
    const served = await call(server, 'GET', '/v1/openapi.json');
    assert.equal(served.status, 200);
    assert.match(served.headers.get('content-type')!, /^application\/json/);
    assert.equal(served.text, committed);
  });

  test('is OpenAPI 3.1 with the three operations, bearer security, and getPet deprecated', () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(doc.info.version, '1.0.0');
    assert.equal(doc.paths['/v1/pets'].get.operationId, 'listPets');
    assert.equal(doc.paths['/v1/pets'].post.operationId, 'createPet');
    assert.equal(doc.paths['/v1/pets/{petId}'].get.operationId, 'getPet');
    assert.equal(doc.paths['/v1/pets/{petId}'].get.deprecated, true);
    assert.deepEqual(doc.security, [{ bearerAuth: [] }]);
    assert.equal(doc.components.securitySchemes.bearerAuth.scheme, 'bearer');
  });

  test('lists every status each operation can answer, with the rate-limit headers on each', () => {
    const expected: Record<string, string[]> = {
      listPets: ['200', '400', '401', '429', '500', '503'],
      createPet: ['201', '400', '401', '409', '413', '415', '422', '429', '500', '503'],
      getPet: ['200', '400', '401', '404', '410', '429', '500', '503'],
    };
    const ops = [doc.paths['/v1/pets'].get, doc.paths['/v1/pets'].post, doc.paths['/v1/pets/{petId}'].get];
    for (const op of ops) {
      assert.deepEqual(Object.keys(op.responses).sort(), expected[op.operationId]!.sort(), op.operationId);
      for (const [status, response] of Object.entries<any>(op.responses)) {
        for (const h of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit']) {
          assert.ok(response.headers?.[h], `${op.operationId} ${status} ${h}`);
        }
        if (status === '429') assert.ok(response.headers['Retry-After']);
        if (status === '401') assert.ok(response.headers['WWW-Authenticate']);
        if (op.operationId === 'getPet') for (const h of ['Deprecation', 'Sunset', 'Link']) assert.ok(response.headers[h]);
      }
    }
    assert.ok(doc.paths['/v1/pets'].get.responses['200'].headers.Link);
    assert.ok(doc.paths['/v1/pets'].post.responses['201'].headers.Location);
    assert.ok(doc.components.responses.MethodNotAllowed.headers.Allow);
  });

  test('enumerates every error code and the int64 and name rules', () => {
    const schemas = doc.components.schemas;
    assert.deepEqual(schemas.Error.properties.code.enum, Object.keys(ERROR_CODES));
    assert.deepEqual(schemas.Error.required.sort(), ['code', 'message', 'status']);
    assert.equal(schemas.Pet.properties.categoryId.format, 'int64');
    // The default is stated in words, not with `default`, which generated clients turn into a required field.
    assert.equal(schemas.NewPet.properties.status.default, undefined);
    assert.match(schemas.NewPet.properties.status.description, /`available` when omitted/);
    assert.ok(!schemas.NewPet.required.includes('status'));
    assert.equal(schemas.NewPet.properties.name.maxLength, 100);
    assert.equal(schemas.NewPet.additionalProperties, false);
    assert.deepEqual(schemas.PetStatus.enum, ['available', 'pending', 'sold']);
    const limit = doc.paths['/v1/pets'].get.parameters.find((p: any) => p.name === 'limit');
    assert.deepEqual([limit.schema.minimum, limit.schema.maximum, limit.schema.default], [1, 100, 20]);
  });
});
