/**
 * Every error a client can provoke: each gets the Error shape with the right status and code,
 * leaves nothing stored, and none is ever a 5xx.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, sendRaw } from '../support/raw-http.ts';
import { call, errorOf, startTestServer, storedCount, type TestServer } from '../support/servers.ts';

describe('client errors', () => {
  let server: TestServer;
  let key: string;
  before(async () => {
    server = await startTestServer();
    key = await server.key('enterprise', { rpm: 100_000, rpd: 1_000_000 });
  });
  after(() => server.close());

  /** What a refusal found: its message (a pattern where the platform's JSON parser words it) and its details, if any. */
  interface Found {
    message: string | RegExp;
    details?: { field: string; problem: string }[];
  }
  /** A schema refusal: each problem in the message and in the details, in order. */
  const invalid = (...problems: [field: string, problem: string][]): Found => ({
    message: `Invalid body: ${problems.map(([field, problem]) => `${field} ${problem}`).join('; ')}`,
    details: problems.map(([field, problem]) => ({ field, problem })),
  });
  /** JSON.parse's own words follow the prefix; the start of them names what it found, the position where. */
  const notJson = (found: string): Found => ({ message: new RegExp(`^Request body is not valid JSON: ${found}`) });
  const duplicate = (field: string): Found => ({
    message: `Request body names the field "${field}" more than once`,
    details: [{ field, problem: 'appears more than once' }],
  });
  const INT64_RANGE = 'must be an integer from 1 to 9223372036854775807';
  const NAME_LENGTH = 'must be 1 to 100 characters long';
  const STATUSES = 'must be one of available, pending, sold';
  const fields = (n: number) => JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_v, i) => [`f${i}`, i])));

  const BAD_BODIES: [string, string, Found][] = [
    ['missing name', '{"categoryId":1}', invalid(['name', 'is required'])],
    ['missing categoryId', '{"name":"a"}', invalid(['categoryId', 'is required'])],
    ['empty object', '{}', invalid(['name', 'is required'], ['categoryId', 'is required'])],
    // Empty is also only white space: the field is named once, for the first problem.
    ['empty name', '{"name":"","categoryId":1}', invalid(['name', NAME_LENGTH])],
    ['white-space name', '{"name":" \\t\\n ","categoryId":1}', invalid(['name', 'must not be only white space'])],
    ['no-break-space name', '{"name":"\\u00a0\\u2003","categoryId":1}', invalid(['name', 'must not be only white space'])],
    ['101-character name', JSON.stringify({ name: 'x'.repeat(101), categoryId: 1 }), invalid(['name', NAME_LENGTH])],
    ['101 spaces', JSON.stringify({ name: ' '.repeat(101), categoryId: 1 }), invalid(['name', NAME_LENGTH])],
    ['NUL in name', '{"name":"a\\u0000b","categoryId":1}', invalid(['name', 'must not contain the NUL character'])],
    ['unpaired surrogate in name', '{"name":"a\\ud800b","categoryId":1}', invalid(['name', 'must not contain unpaired UTF-16 surrogates'])],
    ['number name', '{"name":5,"categoryId":1}', invalid(['name', 'must be a string'])],
    ['null name', '{"name":null,"categoryId":1}', invalid(['name', 'must be a string'])],
    ['array name', '{"name":["a"],"categoryId":1}', invalid(['name', 'must be a string'])],
    ['object name', '{"name":{},"categoryId":1}', invalid(['name', 'must be a string'])],
    ['string categoryId', '{"name":"a","categoryId":"1"}', invalid(['categoryId', INT64_RANGE])],
    ['null categoryId', '{"name":"a","categoryId":null}', invalid(['categoryId', INT64_RANGE])],
    ['fractional categoryId', '{"name":"a","categoryId":1.5}', invalid(['categoryId', INT64_RANGE])],
    // JSON.parse rounds these to an integer; the exact literal shows the fraction.
    ['tiny fraction categoryId', '{"name":"a","categoryId":1.0000000000000000001}', invalid(['categoryId', INT64_RANGE])],
    ['fraction by a negative exponent', '{"name":"a","categoryId":1000000000000000001e-18}', invalid(['categoryId', INT64_RANGE])],
    ['zero categoryId', '{"name":"a","categoryId":0}', invalid(['categoryId', INT64_RANGE])],
    ['negative categoryId', '{"name":"a","categoryId":-1}', invalid(['categoryId', INT64_RANGE])],
    ['categoryId of 2^63', '{"name":"a","categoryId":9223372036854775808}', invalid(['categoryId', INT64_RANGE])],
    ['categoryId of 2^64', '{"name":"a","categoryId":18446744073709551616}', invalid(['categoryId', INT64_RANGE])],
    ['huge exponent categoryId', '{"name":"a","categoryId":1e400}', invalid(['categoryId', INT64_RANGE])],
    ['boolean categoryId', '{"name":"a","categoryId":true}', invalid(['categoryId', INT64_RANGE])],
    ['unknown status', '{"name":"a","categoryId":1,"status":"adopted"}', invalid(['status', STATUSES])],
    ['null status', '{"name":"a","categoryId":1,"status":null}', invalid(['status', STATUSES])],
    ['number status', '{"name":"a","categoryId":1,"status":1}', invalid(['status', STATUSES])],
    ['status in capitals', '{"name":"a","categoryId":1,"status":"SOLD"}', invalid(['status', STATUSES])],
    [
      'every field wrong',
      '{"name":"","categoryId":1.5,"status":null}',
      invalid(['name', NAME_LENGTH], ['categoryId', INT64_RANGE], ['status', STATUSES]),
    ],
    ['client-chosen id', '{"id":7,"name":"a","categoryId":1}', invalid(['id', 'is not a field of this resource'])],
    ['unknown field', '{"name":"a","categoryId":1,"color":"red"}', invalid(['color', 'is not a field of this resource'])],
    ['__proto__ field', '{"name":"a","categoryId":1,"__proto__":{"x":1}}', invalid(['__proto__', 'is not a field of this resource'])],
    ['array body', '[{"name":"a","categoryId":1}]', invalid(['body', 'must be a JSON object'])],
    ['string body', '"hello"', invalid(['body', 'must be a JSON object'])],
    // A string has as many keys as characters: it is not counted as an object's fields.
    ['string body of 100 characters', JSON.stringify('x'.repeat(100)), invalid(['body', 'must be a JSON object'])],
    ['number body', '42', invalid(['body', 'must be a JSON object'])],
    ['null body', 'null', invalid(['body', 'must be a JSON object'])],
    ['malformed JSON', '{"name":"a",', notJson('Expected double-quoted property name in JSON at position 12\\b')],
    ['trailing comma', '{"name":"a","categoryId":1,}', notJson('Expected double-quoted property name in JSON at position 27\\b')],
    ['single quotes', "{'name':'a','categoryId':1}", notJson("Expected property name or '}' in JSON at position 1\\b")],
    [
      'two documents',
      '{"name":"a","categoryId":1}{"name":"b","categoryId":2}',
      notJson('Unexpected non-whitespace character after JSON at position 27\\b'),
    ],
    ['NaN', '{"name":"a","categoryId":NaN}', notJson("Unexpected token 'N'")],
    ['empty body', '', { message: 'Request body is not valid JSON: Unexpected end of JSON input' }],
    // A BOM is not part of JSON text (RFC 8259 forbids sending one); it is named rather than shown.
    [
      'a UTF-8 byte order mark',
      '\ufeff{"name":"a","categoryId":1}',
      { message: 'Request body starts with a byte order mark (U+FEFF); send the JSON text without it' },
    ],
    ['duplicate keys', '{"name":"a","categoryId":1,"categoryId":2}', duplicate('categoryId')],
    ['duplicate keys of equal value', '{"name":"a","categoryId":1,"name":"a"}', duplicate('name')],
    ['a duplicate key spelled with an escape', '{"name":"a","categoryId":1,"n\\u0061me":"a"}', duplicate('name')],
    ['a duplicate key after nested values', '{"x":{"name":"a","y":[1,{"z":"}"}]},"name":"a","categoryId":1,"x":1}', duplicate('x')],
    // A literal value ends where the next comma or the closing brace is: neither may lose the key before it.
    ['a duplicate key whose first value is true', '{"x":true,"name":"a","categoryId":1,"x":1}', duplicate('x')],
    ['a duplicate key whose first value is false', '{"name":"a","x":false,"categoryId":1,"x":"b"}', duplicate('x')],
    ['a duplicate key whose first value is null', '{"name":"a","categoryId":1,"x":null,"x":null}', duplicate('x')],
    ['a duplicate key whose last value is true, before the closing brace', '{"x":1,"name":"a","categoryId":1,"x":true}', duplicate('x')],
    ['a duplicate key among spaces and line breaks', '{ "name" : "a" ,\n "categoryId" : 1 ,\r\n\t"name" : "b" }', duplicate('name')],
    ['a duplicate key after an array value', '{"x":[1,"a,b"],"y":[],"name":"a","categoryId":1,"y":2}', duplicate('y')],
    ['a duplicate key after an escaped quote', '{"name":"a\\"","x":"\\\\","categoryId":1,"x":2}', duplicate('x')],
    ['a duplicate key after a negative number', '{"x":-1.5e-3,"name":"a","categoryId":1,"x":2}', duplicate('x')],
    // Fields are counted before validation: 64 reach the schema (whose message counts the rest), 65 do not.
    [
      '65 fields',
      fields(65),
      { message: 'Request body has 65 fields; at most 64 are accepted', details: [{ field: 'body', problem: 'has more than 64 fields' }] },
    ],
    [
      '64 fields',
      fields(64),
      { message: /^Invalid body: name is required; categoryId is required; f0 is not a field of this resource \(and 63 more;/ },
    ],
    // JSON.parse takes any depth in 64 KiB; the schema refuses what it finds at the top.
    [
      'deeply nested object',
      '{"a":'.repeat(10000) + '1' + '}'.repeat(10000),
      invalid(['name', 'is required'], ['categoryId', 'is required'], ['a', 'is not a field of this resource']),
    ],
    ['deeply nested', '['.repeat(20000) + ']'.repeat(20000), invalid(['body', 'must be a JSON object'])],
  ];

  for (const [label, body, found] of BAD_BODIES) {
    test(`createPet refuses ${label} with a 400 saying what it found, and stores nothing`, async () => {
      const before = await storedCount(server);
      const res = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'content-type': 'application/json' } });
      const err = errorOf(res, 400, 'invalid_request');
      if (typeof found.message === 'string') assert.equal(err.message, found.message);
      else assert.match(err.message, found.message);
      if (found.details || typeof found.message === 'string') assert.deepEqual(err.details, found.details);
      assert.equal(await storedCount(server), before);
    });
  }

  test('a categoryId written with a negative exponent is the integer it denotes, and duplicate-free bodies with literals are taken', async () => {
    for (const [body, categoryId] of [
      ['{"name":"exp","categoryId":100e-2}', '1'],
      ['{"name":"exp","categoryId":92233720368547758070e-1}', '9223372036854775807'],
      ['{"categoryId":7,"name":"literals","status":"sold"}', '7'],
    ] as const) {
      const res = await call(server, 'POST', '/v1/pets', { key, body, headers: { 'content-type': 'application/json' } });
      assert.equal(res.status, 201, res.text);
      // The id is read from the text: JSON.parse would round the second one.
      assert.match(res.text, new RegExp(`"categoryId":"?${categoryId}"?[,}]`));
    }
  });

  test('Content-Encoding identity, in any case, is an uncompressed body and accepted; any other coding is a 415 naming it', async () => {
    for (const coding of ['identity', 'IDENTITY', 'Identity']) {
      const res = await call(server, 'POST', '/v1/pets', {
        key,
        body: { name: 'identity', categoryId: 1 },
        headers: { 'content-type': 'application/json', 'content-encoding': coding },
      });
      assert.equal(res.status, 201, `${coding}: ${res.text}`);
    }
    for (const coding of ['gzip', 'br', 'identity, gzip']) {
      const res = await call(server, 'POST', '/v1/pets', {
        key,
        body: { name: 'compressed', categoryId: 1 },
        headers: { 'content-type': 'application/json', 'content-encoding': coding },
      });
      const err = errorOf(res, 415, 'unsupported_media_type');
      assert.equal(err.message, `Content-Encoding ${coding} is not supported; send the body uncompressed`);
    }
  });

  test('a 400 names every problem of the body at once, in words', async () => {
    const res = await call(server, 'POST', '/v1/pets', { key, body: { name: '  ', id: 5 } });
    const err = errorOf(res, 400, 'invalid_request');
    assert.deepEqual(err.details, [
      { field: 'categoryId', problem: 'is required' },
      { field: 'id', problem: 'is not a field of this resource' },
      { field: 'name', problem: 'must not be only white space' },
    ]);
    assert.equal(
      err.message,
      'Invalid body: categoryId is required; id is not a field of this resource; name must not be only white space',
    );
  });

  test('a body over 64 KiB is a 413', async () => {
    const res = await call(server, 'POST', '/v1/pets', {
      key,
      body: JSON.stringify({ name: 'a', categoryId: 1, pad: 'x'.repeat(70_000) }),
    });
    errorOf(res, 413, 'payload_too_large');
  });

  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
    test(`a ${type} body is a 415`, async () => {
      const res = await call(server, 'POST', '/v1/pets', { key, body: 'name=a&categoryId=1', headers: { 'content-type': type } });
      errorOf(res, 415, 'unsupported_media_type');
    });
  }

  test('a body without a Content-Type is a 415', async () => {
    // Below fetch, which would add a Content-Type of its own to a string body.
    const headers = { authorization: `Bearer ${key}`, 'content-length': '2' };
    const res = await request(`${server.url}/v1/pets`, { method: 'POST', headers, body: '{}' });
    assert.equal(res.status, 415);
    assert.equal(JSON.parse(res.body).code, 'unsupported_media_type');
  });

  test('application/json with a charset parameter is accepted', async () => {
    const res = await call(server, 'POST', '/v1/pets', {
      key,
      body: { name: 'charset', categoryId: 1 },
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    assert.equal(res.status, 201);
  });

  const LIMIT = ['limit', 'must be an integer from 1 to 100'] as const;
  const STATUS = ['status', STATUSES] as const;
  const CURSOR = ['cursor', 'is not a cursor this service issued for these filters'] as const;
  const BAD_QUERIES: [query: string, field: string, problem: string][] = [
    ['limit=0', ...LIMIT],
    ['limit=101', ...LIMIT],
    ['limit=-1', ...LIMIT],
    ['limit=abc', ...LIMIT],
    ['limit=1.5', ...LIMIT],
    ['limit=', ...LIMIT],
    ['limit=1&limit=2', ...LIMIT],
    ['limit=1e1', ...LIMIT],
    ['status=adopted', ...STATUS],
    ['status=', ...STATUS],
    ['status=SOLD', ...STATUS],
    ['status=sold&status=pending', ...STATUS],
    ['cursor=abc', ...CURSOR],
    ['cursor=', ...CURSOR],
    ['cursor=' + 'A'.repeat(300), 'cursor', 'must be at most 200 characters long'],
    ['cursor=%00', ...CURSOR],
    ['cursor=a&cursor=b', 'cursor', 'must be a string'],
  ];
  for (const [query, field, problem] of BAD_QUERIES) {
    test(`listPets refuses ?${query.slice(0, 40)} with a 400 saying what is wrong`, async () => {
      const err = errorOf(await call(server, 'GET', `/v1/pets?${query}`, { key }), 400, 'invalid_request');
      assert.deepEqual(err.details, [{ field, problem }]);
    });
  }

  test('a cursor that was altered, or made for another status filter, is a 400', async () => {
    for (let i = 0; i < 3; i++) await call(server, 'POST', '/v1/pets', { key, body: { name: `p${i}`, categoryId: 1 } });
    const page = await call(server, 'GET', '/v1/pets?limit=1', { key });
    const cursor = new URL(/<([^>]+)>/.exec(page.headers.get('link')!)![1]!, server.url).searchParams.get('cursor')!;
    const flipped = cursor.slice(0, 3) + (cursor[3] === 'A' ? 'B' : 'A') + cursor.slice(4);
    errorOf(await call(server, 'GET', `/v1/pets?limit=1&cursor=${flipped}`, { key }), 400, 'invalid_request');
    errorOf(await call(server, 'GET', `/v1/pets?limit=1&cursor=${cursor}x`, { key }), 400, 'invalid_request');
    errorOf(await call(server, 'GET', `/v1/pets?limit=1&status=sold&cursor=${cursor}`, { key }), 400, 'invalid_request');
    assert.equal((await call(server, 'GET', `/v1/pets?limit=1&cursor=${cursor}`, { key })).status, 200);
  });

  test('an empty cursor is a 400 also once the first page is cached', async () => {
    for (let i = 0; i < 3; i++) await call(server, 'POST', '/v1/pets', { key, body: { name: `e${i}`, categoryId: 1 } });
    // A full first page is kept in the page cache: an empty cursor must not be taken for no cursor.
    for (let i = 0; i < 2; i++) assert.equal((await call(server, 'GET', '/v1/pets?limit=2', { key })).status, 200);
    errorOf(await call(server, 'GET', '/v1/pets?limit=2&cursor=', { key }), 400, 'invalid_request');
  });

  for (const id of ['0', '-1', 'abc', '1.5', '1e3', '9223372036854775808', '99999999999999999999999999', '%20', '+1', '']) {
    test(`getPet refuses the id ${id} with a 400`, async () => {
      errorOf(await call(server, 'GET', `/v1/pets/${id}`, { key }), 400, 'invalid_request');
    });
  }

  test('unknown paths, under /v1 or not, are a 404 with the Error shape', async () => {
    // `/` itself redirects to the documentation page (processes/startup.test.ts).
    for (const path of ['/v1/nope', '/v1', '/nope', '/v2/pets', '/v1/pets/1/owner']) {
      errorOf(await call(server, 'GET', path, { key }), 404, 'not_found');
    }
  });

  test('other methods on known paths are a 405 with Allow, before any body is read', async () => {
    for (const [method, path, allow] of [
      ['DELETE', '/v1/pets/1', 'GET, HEAD, OPTIONS'],
      ['PUT', '/v1/pets/1', 'GET, HEAD, OPTIONS'],
      ['PATCH', '/v1/pets/1', 'GET, HEAD, OPTIONS'],
      ['POST', '/v1/pets/1', 'GET, HEAD, OPTIONS'],
      ['DELETE', '/v1/pets', 'GET, HEAD, POST, OPTIONS'],
      ['PUT', '/v1/pets', 'GET, HEAD, POST, OPTIONS'],
      ['PATCH', '/v1/pets', 'GET, HEAD, POST, OPTIONS'],
    ] as const) {
      const res = await call(server, method, path, { key, body: 'not json', headers: { 'content-type': 'text/plain' } });
      errorOf(res, 405, 'method_not_allowed');
      assert.equal(res.headers.get('allow'), allow);
    }
  });

  test('OPTIONS answers 204 with Allow', async () => {
    const res = await call(server, 'OPTIONS', '/v1/pets');
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('allow'), 'GET, HEAD, POST, OPTIONS');
  });

  // Unusual but valid HTTP: held to the same rules as the usual forms.
  test('an absolute-form target is authenticated and limited exactly like the origin form', async () => {
    const before = await storedCount(server);
    const body = '{"name":"Absolute","categoryId":1}';
    const anonymous = await raw(
      server,
      `POST http://evil.example/v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    assert.deepEqual([anonymous.status, anonymous.body.code], [401, 'unauthorized']);
    assert.equal(await storedCount(server), before, 'nothing stored without a key');
    const get = await raw(server, `GET HTTP://evil.example:99/v1/pets/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.deepEqual([get.status, get.body.code], [401, 'unauthorized']);
    const withKey = await raw(
      server,
      `POST http://h/v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    assert.deepEqual([withKey.status, withKey.body.name], [201, 'Absolute']);
    assert.ok(withKey.headers.includes('x-ratelimit-limit:'), withKey.headers);
    assert.ok(withKey.headers.includes('cache-control: no-store'), withKey.headers);
  });

  test('a body that is not valid UTF-8 is a 400 and is not stored with replacement characters', async () => {
    const before = await storedCount(server);
    const bytes = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","categoryId":1}')]);
    const res = await fetch(`${server.url}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: bytes,
    });
    const err = errorOf({ status: res.status, headers: res.headers, json: await res.json() }, 400, 'invalid_request');
    assert.match(err.message, /UTF-8/);
    assert.equal(await storedCount(server), before);
  });

  test('an Expect other than 100-continue is ignored: the request is answered as usual', async () => {
    const res = await raw(server, `GET /v1/pets HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nConnection: close\r\n\r\n`);
    assert.deepEqual([res.status, res.body.code], [401, 'unauthorized']);
    assert.ok(res.headers.includes('x-ratelimit-limit:'));
  });

  test('a WebDAV method on a known path is a 405 with Allow, not a 404', async () => {
    const res = await raw(server, `PROPFIND /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);
    assert.deepEqual([res.status, res.body.code], [405, 'method_not_allowed']);
    assert.match(res.headers, /\r\nallow: get, head, post, options\r\n/);
  });

  test('a path id of any length is a 400 naming petId, with the rate-limit headers', async () => {
    const res = await call(server, 'GET', `/v1/pets/${'9'.repeat(500)}`, { key });
    const err = errorOf(res, 400, 'invalid_request');
    assert.equal(err.details[0].field, 'petId');
    assert.ok(res.headers.get('x-ratelimit-limit'));
  });
});

/** Sends raw bytes and returns the answer's status, its body parsed, and its head lower-cased for matching. */
async function raw(server: TestServer, bytes: string): Promise<{ status: number; body: any; headers: string }> {
  const answer = await sendRaw(server.url, bytes);
  return { status: answer.status, body: JSON.parse(answer.body), headers: answer.head.toLowerCase() };
}

describe('malformed HTTP', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  const CASES: [string, string, number, string][] = [
    ['invalid percent-encoding in the path', 'GET /v1/pets/%ZZ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 400, 'invalid_request'],
    ['a garbage request line', 'GARBAGE\r\n\r\n', 400, 'invalid_request'],
    ['a control character in a header', 'GET /v1/pets HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n\r\n', 400, 'invalid_request'],
    ['a non-numeric Content-Length', 'POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}', 400, 'invalid_request'],
    ['TRACE on a known path', 'TRACE /v1/pets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 405, 'method_not_allowed'],
    ['an unknown method', 'FOO /v1/pets HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'invalid_request'],
    [
      'headers over the size limit',
      `GET /v1/pets HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
      'request_header_fields_too_large',
    ],
  ];
  for (const [label, bytes, status, code] of CASES) {
    test(`${label} gets ${status} with the Error shape`, async () => {
      const res = await raw(server, bytes);
      assert.equal(res.status, status);
      assert.deepEqual([res.body.code, res.body.status], [code, status]);
    });
  }

  test('a compressed request body is a 415', async () => {
    const key = await server.key();
    const res = await call(server, 'POST', '/v1/pets', {
      key,
      body: '{}',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    });
    errorOf(res, 415, 'unsupported_media_type');
  });
});

describe('server errors', () => {
  test('a storage failure is a 500 internal_error that reveals nothing internal', async () => {
    const server = await startTestServer();
    try {
      const key = await server.key();
      await call(server, 'GET', '/v1/pets', { key }); // the key is now cached
      await server.store.close(); // a real failure: the database connection is gone
      const res = await call(server, 'GET', '/v1/pets', { key });
      const err = errorOf(res, 500, 'internal_error');
      assert.equal(err.message, 'Internal server error');
      assert.doesNotMatch(res.text, /sqlite|database|stack|at /i);
      assert.ok(res.headers.get('x-ratelimit-limit'));
    } finally {
      await server.close();
    }
  });
});
