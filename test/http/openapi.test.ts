/**
 * The contract: the committed OpenAPI document is the one the route schemas generate, the server
 * serves it as it is, and it states what clients see.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { generateOpenApiDocument } from '../../scripts/openapi-document.ts';
import { ERROR_CODES } from '../../src/http/contract/api-error.ts';
import { request } from '../support/raw-http.ts';
import { call, startTestServer, type TestServer } from '../support/servers.ts';

const committed = readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8');

describe('OpenAPI document', () => {
  let server: TestServer;
  let doc: any;
  before(async () => {
    server = await startTestServer();
    doc = (await call(server, 'GET', '/v1/openapi.json')).json;
  });
  after(() => server.close());

  test('the route schemas generate the committed openapi.json byte for byte (run `npm run openapi` after a change)', async () => {
    assert.equal(await generateOpenApiDocument(), committed);
  });

  test('the server serves the committed openapi.json byte for byte', async () => {
    const served = await call(server, 'GET', '/v1/openapi.json');
    assert.equal(served.status, 200);
    assert.match(served.headers.get('content-type')!, /^application\/json/);
    assert.equal(served.text, committed);
  });

  test('comes in br or gzip when asked, with an ETag per coding that If-None-Match turns into a 304', async () => {
    const url = `${server.url}/v1/openapi.json`;
    const plain = await request(url, {});
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.match(plain.headers.etag!, /^"[A-Za-z0-9_-]{22}"$/);
    assert.equal(plain.headers.vary, 'Accept-Encoding');
    const br = await request(url, { headers: { 'accept-encoding': 'br' } });
    assert.equal(br.headers['content-encoding'], 'br');
    assert.equal(brotliDecompressSync(br.bytes).toString('utf8'), committed);
    assert.ok(br.bytes.length < committed.length / 5, `${br.bytes.length} bytes in br`);
    const gzip = await request(url, { headers: { 'accept-encoding': 'gzip' } });
    assert.equal(gunzipSync(gzip.bytes).toString('utf8'), committed);
    assert.equal(new Set([plain.headers.etag, br.headers.etag, gzip.headers.etag]).size, 3, 'a tag per coding');
    const again = await request(url, { headers: { 'accept-encoding': 'br', 'if-none-match': br.headers.etag! } });
    assert.equal(again.status, 304);
    assert.equal(again.bytes.length, 0);
    assert.equal(again.headers.etag, br.headers.etag);
    assert.ok(again.headers['x-ratelimit-limit'], 'charged, with its rate-limit headers');
  });

  test('is OpenAPI 3.1 with exactly the three operations, bearer security, and getPet deprecated', () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(doc.info.version, '1.0.0');
    const operations = Object.entries<any>(doc.paths).flatMap(([path, item]) =>
      Object.entries<any>(item).map(([method, operation]) => `${method} ${path} ${operation.operationId}`),
    );
    assert.deepEqual(operations, ['get /pets listPets', 'post /pets createPet', 'get /pets/{petId} getPet']);
    assert.equal(doc.paths['/pets/{petId}'].get.deprecated, true);
    assert.deepEqual(doc.security, [{ bearerAuth: [] }]);
    assert.equal(doc.components.securitySchemes.bearerAuth.scheme, 'bearer');
  });

  test("follows the interface's layout: every server ends in /v1 and the paths are relative to it", () => {
    assert.deepEqual(Object.keys(doc.paths), ['/pets', '/pets/{petId}']);
    assert.equal(doc.servers[0].url, '/v1');
    assert.equal(doc.servers.length, 3);
    for (const server of doc.servers) {
      assert.match(server.url, /\/v1$/);
      // @apidevtools/swagger-parser, which some generators use, refuses a description in a server variable.
      for (const variable of Object.values<any>(server.variables ?? {})) assert.deepEqual(Object.keys(variable), ['default']);
    }
    assert.match(doc.servers[1].description, /^Production/);
    assert.match(doc.servers[2].description, /^Staging/);
  });

  /** A response with its `$ref` followed. */
  const resolved = (response: any) => (response.$ref ? doc.components.responses[response.$ref.split('/').pop()] : response);
  /** A response's headers, each with its `$ref` followed. */
  const headersOf = (response: any): Record<string, any> =>
    Object.fromEntries(
      Object.entries<any>(resolved(response).headers ?? {}).map(([name, h]) => [name, doc.components.headers[h.$ref.split('/').pop()]]),
    );

  test('lists every status each operation can answer, with the rate-limit headers on each', () => {
    const expected: Record<string, string[]> = {
      listPets: ['200', '304', '400', '401', '405', '408', '429', '431', '500', '503'],
      createPet: ['201', '400', '401', '405', '408', '409', '413', '415', '422', '429', '431', '500', '503'],
      getPet: ['200', '304', '400', '401', '404', '405', '408', '410', '429', '431', '500', '503'],
    };
    const ops = [doc.paths['/pets'].get, doc.paths['/pets'].post, doc.paths['/pets/{petId}'].get];
    for (const op of ops) {
      assert.deepEqual(Object.keys(op.responses).sort(), expected[op.operationId]!.sort(), op.operationId);
      for (const [status, response] of Object.entries<any>(op.responses)) {
        const headers = headersOf(response);
        assert.ok(headers['X-Request-Id']?.required, `${op.operationId} ${status} X-Request-Id`);
        // A 5xx can come before the key's window is known (storage unreachable while looking it up).
        if (Number(status) < 500) {
          for (const h of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit']) {
            assert.ok(headers[h]?.required, `${op.operationId} ${status} ${h}`);
          }
        }
        if (status === '429') assert.ok(headers['Retry-After'].required);
        if (status === '401') assert.ok(headers['WWW-Authenticate'].required);
        if (status === '405') assert.ok(headers.Allow.required);
        // The 405 comes from the path's other methods, and 408 and 431 before routing, not from getPet: they
        // have no deprecation headers.
        if (op.operationId === 'getPet' && !['405', '408', '431'].includes(status)) {
          for (const h of ['Deprecation', 'Sunset', 'Link']) assert.ok(headers[h].required, `getPet ${status} ${h}`);
        }
      }
    }
    assert.equal(headersOf(doc.paths['/pets'].get.responses['200']).Link.required, false);
    assert.ok(headersOf(doc.paths['/pets'].post.responses['201']).Location.required);
  });

  test('declares ETag on the 200s, a 304 without a body, and If-None-Match, for listPets and getPet', () => {
    const parameter = doc.components.parameters.IfNoneMatch;
    assert.deepEqual([parameter.name, parameter.in, parameter.required], ['If-None-Match', 'header', false]);
    for (const [path, method] of [
      ['/pets', 'get'],
      ['/pets/{petId}', 'get'],
    ] as const) {
      const operation = doc.paths[path][method];
      const label = `${method} ${path}`;
      assert.ok(
        operation.parameters.some((p: any) => p.$ref === '#/components/parameters/IfNoneMatch'),
        `${label} If-None-Match`,
      );
      assert.ok(headersOf(operation.responses['200']).ETag.required, `${label} 200 ETag`);
      const notModified = operation.responses['304'];
      assert.equal(notModified.content, undefined, `${label} 304 has no body`);
      const headers = headersOf(notModified);
      for (const name of ['ETag', 'X-Request-Id', 'X-RateLimit-Remaining', 'RateLimit'])
        assert.ok(headers[name]?.required, `${label} 304 ${name}`);
      if (path === '/pets') assert.equal(headers.Link.required, false, `${label} 304 Link to the next page`);
      else if (path === '/pets/{petId}')
        for (const name of ['Deprecation', 'Sunset', 'Link']) assert.ok(headers[name].required, `${label} 304 ${name}`);
    }
    assert.equal(doc.paths['/pets'].post.responses['304'], undefined);
    assert.ok(!(doc.paths['/pets'].post.parameters ?? []).some((p: any) => p.$ref), 'createPet reads no If-None-Match');
  });

  test('writes each header and each shared error response once and refers to them', () => {
    const text = JSON.stringify({ paths: doc.paths, responses: doc.components.responses });
    assert.doesNotMatch(text, /"X-RateLimit-Limit":\{"(?!\$ref)/, 'a rate-limit header written out inside a response');
    for (const name of Object.keys(doc.components.headers))
      assert.ok(text.includes(`#/components/headers/${name}`), `header ${name} unused`);
    for (const name of Object.keys(doc.components.responses))
      assert.ok(text.includes(`#/components/responses/${name}`), `response ${name} unused`);
    assert.deepEqual(doc.paths['/pets'].get.responses['401'], { $ref: '#/components/responses/Unauthorized' });
  });

  test('says in words what HEAD, OPTIONS and the document do, declares the 405 on every operation, and the server agrees', async () => {
    const description: string = doc.info.description;
    assert.match(description, /`HEAD` wherever `GET` is/);
    assert.match(description, /`OPTIONS` answers 204 with `Allow`/);
    assert.match(description, /`GET \/v1\/openapi\.json`, no key needed/);
    assert.match(doc.components.responses.MethodNotAllowed.description, /`Allow`/);
    const key = await server.key();
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const operation of Object.values<any>(item))
        assert.deepEqual(operation.responses['405'], { $ref: '#/components/responses/MethodNotAllowed' }, operation.operationId);
      const url = `/v1${path.replace('{petId}', '1')}`;
      // The methods the server allows on the path are the document's, HEAD wherever GET is, and OPTIONS.
      const options = await call(server, 'OPTIONS', url);
      assert.equal(options.status, 204);
      const methods = Object.keys(item).map((m) => m.toUpperCase());
      const expected = [...methods, ...(methods.includes('GET') ? ['HEAD'] : []), 'OPTIONS'];
      assert.deepEqual(options.headers.get('allow')!.split(', ').sort(), expected.sort(), path);
      if (item.get) {
        const get = await call(server, 'GET', url, { key });
        const head = await call(server, 'HEAD', url, { key });
        assert.equal(head.status, get.status, `HEAD ${path}`);
        assert.equal(head.text, '');
      }
    }
    const document = await call(server, 'HEAD', '/v1/openapi.json');
    assert.equal(document.status, 200);
  });

  test('declares the status of every error code, and those any request can get (400, 408, 431) on every operation', () => {
    const declared = new Set<number>();
    for (const item of Object.values<any>(doc.paths)) {
      for (const operation of Object.values<any>(item)) {
        for (const status of Object.keys(operation.responses)) declared.add(Number(status));
        for (const status of ['400', '408', '431']) assert.ok(operation.responses[status], `${operation.operationId} ${status}`);
      }
    }
    for (const [code, status] of Object.entries(ERROR_CODES)) assert.ok(declared.has(status), `${code} (${status}) is declared nowhere`);
  });

  test('enumerates every error code, keeps responses open to new fields and codes, and states the int64 and name rules', () => {
    const schemas = doc.components.schemas;
    assert.equal(schemas.Error, undefined, 'named ErrorBody, not Error, which generated code would shadow');
    assert.deepEqual(schemas.ErrorCode.enum, Object.keys(ERROR_CODES));
    assert.deepEqual(schemas.ErrorBody.properties.code.anyOf[0], { $ref: '#/components/schemas/ErrorCode' });
    assert.equal(schemas.ErrorBody.properties.code.anyOf[1].type, 'string');
    assert.deepEqual(schemas.ErrorBody.required.sort(), ['code', 'message', 'status']);
    for (const name of ['Pet', 'ErrorBody']) assert.equal(schemas[name].additionalProperties, undefined, `${name} is open`);
    assert.equal(schemas.ErrorBody.properties.details.items.additionalProperties, undefined);
    assert.equal(schemas.Pet.properties.categoryId.format, 'int64');
    // The default is stated in words, not with `default`, which generated clients turn into a required field.
    assert.equal(schemas.NewPet.properties.status.default, undefined);
    assert.equal(schemas.NewPet.properties.status.$ref, '#/components/schemas/PetStatus');
    assert.match(schemas.NewPet.properties.status.description, /`available` when omitted/);
    assert.ok(!schemas.NewPet.required.includes('status'));
    assert.equal(schemas.NewPet.properties.name.maxLength, 100);
    assert.equal(schemas.NewPet.additionalProperties, false);
    assert.deepEqual(schemas.PetStatus.enum, ['available', 'pending', 'sold']);
    assert.equal(schemas.Pets.maxItems, 100);
    const parameters = doc.paths['/pets'].get.parameters;
    const limit = parameters.find((p: any) => p.name === 'limit');
    assert.deepEqual([limit.schema.minimum, limit.schema.maximum, limit.schema.default], [1, 100, 20]);
    assert.equal(parameters.find((p: any) => p.name === 'cursor').schema.maxLength, 200);
  });

  test('every int64 field states its full range in words and by its format, with the extension, and no number in the document is rounded by JSON.parse', () => {
    const int64: any[] = [];
    const numbers: number[] = [];
    (function walk(node: any) {
      if (Array.isArray(node)) return node.forEach(walk);
      if (typeof node === 'number') numbers.push(node);
      if (node === null || typeof node !== 'object') return;
      if (node.format === 'int64' && node['x-int64-exact']) int64.push(node);
      for (const v of Object.values(node)) walk(v);
    })(doc);
    // id, categoryId (Pet and NewPet) and the petId parameter.
    assert.equal(int64.length, 4);
    for (const schema of int64) {
      assert.deepEqual([schema.type, schema.minimum, schema.maximum], ['integer', 1, undefined]);
    }
    // A renderer (or any reader) that parses the document with JSON.parse would show 2^63 - 1 as
    // 9223372036854776000: the document holds no number that a double cannot hold exactly.
    assert.ok(numbers.length > 0);
    for (const n of numbers) assert.ok(Number.isSafeInteger(n) || !Number.isInteger(n), `number ${n} does not parse exactly`);
    assert.doesNotMatch(committed, /9223372036854776000|: 9223372036854775807/);
    const parameter = doc.paths['/pets/{petId}'].get.parameters.find((p: any) => p.name === 'petId');
    for (const description of [
      doc.components.schemas.Pet.properties.id.description,
      doc.components.schemas.Pet.properties.categoryId.description,
      doc.components.schemas.NewPet.properties.categoryId.description,
      parameter.description,
    ]) {
      assert.match(description, /An integer from 1 to 9223372036854775807/);
      assert.match(description, /2\^53/);
    }
  });

  test('the introduction is short, names the default page size, and links to the rate limits section', () => {
    const description: string = doc.info.description;
    const words = description.split(/\s+/).length;
    assert.ok(words <= 250, `${words} words`);
    assert.match(description, /returns 20 pets unless `limit`/);
    assert.match(description, /\]\(#tag\/rate-limits\)/);
    const limits = doc.tags.find((t: any) => t.name === 'Rate limits');
    assert.ok(limits, 'a section of its own');
    assert.ok(!JSON.stringify(doc.paths).includes('"Rate limits"'), 'with no operation');
    assert.match(limits.description, /banned, by default for 15 minutes/);
    assert.match(limits.description, /by default 300 requests a minute/);
    const limit = doc.paths['/pets'].get.parameters.find((p: any) => p.name === 'limit');
    assert.match(limit.description, /20 when omitted/);
  });

  test("names no file of the service's repository: the docs page shows its text to readers who cannot open one", () => {
    const texts: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) return node.forEach(walk);
      if (node === null || typeof node !== 'object') return;
      for (const [key, value] of Object.entries(node)) {
        if ((key === 'description' || key === 'summary') && typeof value === 'string') texts.push(value);
        else walk(value);
      }
    };
    walk(doc);
    assert.ok(texts.length > 50, `${texts.length} texts`);
    const REPOSITORY_PATH = /\b(?:docs|src|test|scripts|examples|client|deploy)\/[\w-]+|\b[\w-]+\.(?:md|ts|mjs)\b/;
    assert.deepEqual(
      texts.filter((t) => REPOSITORY_PATH.test(t)),
      [],
    );
  });
});
