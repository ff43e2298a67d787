/**
 * Independent contract conformance: a live server answers a broad generated set of valid and invalid
 * requests, and every answer is checked against the committed OpenAPI document (openapi.json) by Ajv
 * compiling the document's own schemas: the status is one the operation declares, the body validates
 * against the declared schema of that status, and the headers the document declares for it are sent
 * (the rate-limit headers on every answer) with values of their declared types. HEAD is held to its
 * GET's declaration without a body; OPTIONS and the document itself, which the document describes in
 * words rather than as operations, to what its introduction says.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import fc from 'fast-check';
import { createKey } from '../../src/cli/keys.ts';
import { startTestServer } from '../support/servers.ts';

const document = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8'));
// ajv-formats is CommonJS: under NodeNext its ES default export is the `default` property.
const addFormats = addFormatsModule as unknown as { default: (ajv: Ajv2020) => void };
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
ajv.addSchema(document, 'openapi.json');

/** Headers sent on every answer under /v1, whatever the status. */
const ALWAYS = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit'];
/** Headers the document declares that are sent only in some cases (a next page exists, ...). */
const CONDITIONAL = new Set(['Link', 'WWW-Authenticate', 'Idempotent-Replayed']);

/** Where the document's paths start: the serving server's URL (`/v1`), as the interface says. */
const BASE = document.servers[0].url as string;
assert.equal(BASE, '/v1');

interface Operation {
  template: RegExp;
  path: string;
  method: string;
}
const operations: Operation[] = Object.entries(document.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
  Object.keys(ops).map((method) => ({
    path,
    method: method.toUpperCase(),
    template: new RegExp(`^${BASE}${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
  })),
);

/** A JSON pointer into the document, for Ajv. */
const pointer = (...parts: string[]) => '#/' + parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

/** The declared response for an answer, `$ref` followed; `undeclared` when its operation does not declare the status. */
function responseSpec(method: string, path: string, status: number): { spec: any; where: string } | 'undeclared' | undefined {
  const pathOnly = path.split('?')[0]!;
  const known = operations.filter((o) => o.template.test(pathOnly));
  // The document's own path answers other methods with the shared 405 too.
  if (pathOnly === '/v1/openapi.json' && status === 405)
    return { spec: document.components.responses.MethodNotAllowed, where: '#/components/responses/MethodNotAllowed' };
  // HEAD answers as GET does, without the body (the document's introduction says so).
  const op = known.find((o) => o.method === (method === 'HEAD' ? 'GET' : method));
  if (op) {
    const spec = document.paths[op.path][op.method.toLowerCase()].responses[String(status)];
    if (!spec) return 'undeclared';
    if (!spec.$ref) return { spec, where: pointer('paths', op.path, op.method.toLowerCase(), 'responses', String(status)) };
    const name = spec.$ref.split('/').pop();
    return { spec: document.components.responses[name], where: pointer('components', 'responses', name) };
  }
  if (known.length && status === 405)
    return { spec: document.components.responses.MethodNotAllowed, where: '#/components/responses/MethodNotAllowed' };
  return undefined;
}

/**
 * Answers the introduction describes in words, not as operations: OPTIONS on a documented path (204
 * with `Allow`) and the document itself (`GET /v1/openapi.json`, with its ETag). Checked here as said
 * there; undefined for any other answer.
 */
function describedInWords(method: string, path: string, res: Response, text: string): string | undefined {
  const pathOnly = path.split('?')[0]!;
  const described = pathOnly === '/v1/openapi.json' || operations.some((o) => o.template.test(pathOnly));
  if (method === 'OPTIONS' && res.status === 204 && described) {
    assert.match(document.info.description, /`OPTIONS` answers 204 with `Allow`/);
    assert.match(res.headers.get('allow') ?? '', /^[A-Z]+(, [A-Z]+)*$/);
    return text;
  }
  if (pathOnly === '/v1/openapi.json' && (method === 'GET' || method === 'HEAD') && (res.status === 200 || res.status === 304)) {
    assert.match(document.info.description, /`GET \/v1\/openapi\.json`, no key needed/);
    assert.match(res.headers.get('etag') ?? '', /^"[A-Za-z0-9_-]+"$/);
    if (method === 'GET' && res.status === 200) assert.equal(JSON.parse(text).openapi, '3.1.0');
    return text;
  }
  return undefined;
}

let checked = 0;
const statusesSeen = new Set<string>();

async function checkAnswer(url: string, method: string, path: string, init: RequestInit): Promise<void> {
  const res = await fetch(url + path, { ...init, method });
  const text = await res.text();
  const label = `${method} ${path} ${JSON.stringify(init.headers ?? {})} ${String(init.body ?? '').slice(0, 80)} -> ${res.status} ${text.slice(0, 200)}`;
  checked++;
  statusesSeen.add(`${method} ${path.split('?')[0]!.replace(/\/v1\/pets\/.+/, '/v1/pets/{id}')} ${res.status}`);
  if (path.startsWith('/v1')) for (const name of ALWAYS) assert.ok(res.headers.has(name), `missing ${name}: ${label}`);
  if (describedInWords(method, path, res, text) !== undefined) return;
  const found = responseSpec(method, path, res.status);
  assert.notEqual(found, 'undeclared', `status not declared for this operation: ${label}`);
  if (found === undefined || found === 'undeclared') {
    // Outside /v1 (the documentation page, `/` leading to it) the document describes nothing.
    if (!path.startsWith('/v1') && res.status < 400) return;
    // Paths under /v1 the document does not describe (unknown routes), and refusals of the document
    // itself, answer in the ErrorBody shape (HEAD: without the body).
    assert.ok(res.status >= 400 && res.status < 500, `undocumented success: ${label}`);
    if (method === 'HEAD') return assert.equal(text, '', label);
    const validate = ajv.getSchema('openapi.json#/components/schemas/ErrorBody')!;
    assert.ok(validate(JSON.parse(text)), `ErrorBody shape: ${label}: ${ajv.errorsText(validate.errors)}`);
    return;
  }
  const { spec } = found;
  const media = Object.keys(spec.content ?? {})[0];
  if (method === 'HEAD' || media === undefined) assert.equal(text, '', label);
  else {
    assert.ok(res.headers.get('content-type')?.startsWith(media), `content type ${res.headers.get('content-type')}: ${label}`);
    const validate = ajv.getSchema(`openapi.json${found.where}/content/${media.replace('/', '~1')}/schema`)!;
    assert.ok(validate(JSON.parse(text)), `body: ${label}: ${ajv.errorsText(validate.errors)}`);
  }
  for (const [name, reference] of Object.entries<{ $ref: string }>(spec.headers ?? {})) {
    // Every header is a shared one (components.headers), referred to.
    assert.match(reference.$ref, /^#\/components\/headers\//, `${name} is not a shared header: ${label}`);
    const header = document.components.headers[reference.$ref.split('/').pop()!];
    const value = res.headers.get(name);
    if (value === null) {
      assert.ok(!header.required, `required header ${name} missing: ${label}`);
      assert.ok(CONDITIONAL.has(name) || !path.startsWith('/v1'), `declared header ${name} missing: ${label}`);
      continue;
    }
    const validate = ajv.getSchema(`openapi.json${reference.$ref}/schema`)!;
    const typed = header.schema.type === 'integer' && /^-?[0-9]+$/.test(value) ? Number(value) : value;
    assert.ok(validate(typed), `${name}: ${value}: ${label}: ${ajv.errorsText(validate.errors)}`);
  }
}

test('every answer to generated requests conforms to the committed OpenAPI document', async (t) => {
  const server = await startTestServer();
  t.after(() => server.close());
  const key = await server.key('enterprise', { rpm: 1_000_000, rpd: 10_000_000 });
  const { key: staging } = await createKey(server.store, 'staging', { plan: 'free' });
  const auth = (k: string) => ({ authorization: `Bearer ${k}` });
  const json = { ...auth(key), 'content-type': 'application/json' };

  // Some data, with pages to follow.
  for (let i = 0; i < 30; i++) {
    await checkAnswer(server.url, 'POST', '/v1/pets', {
      headers: json,
      body: JSON.stringify({ name: `pet ${i}`, categoryId: i + 1, status: ['available', 'pending', 'sold'][i % 3] }),
    });
  }
  // One of each kind of answer to the deprecated read, which the generated mix reaches only rarely.
  for (const path of ['/v1/pets/1', '/v1/pets/999999', '/v1/pets/abc']) await checkAnswer(server.url, 'GET', path, { headers: auth(key) });
  // And of HEAD, OPTIONS and the document, on every documented path.
  for (const path of ['/v1/pets', '/v1/pets/1', '/v1/openapi.json']) {
    for (const method of ['HEAD', 'OPTIONS']) await checkAnswer(server.url, method, path, { headers: auth(key) });
  }
  await checkAnswer(server.url, 'GET', '/v1/openapi.json', {});
  // Follow next links to the end, for each filter.
  for (const first of ['/v1/pets?limit=7', '/v1/pets?status=sold&limit=3', '/v1/pets']) {
    let next: string | undefined = first;
    while (next) {
      await checkAnswer(server.url, 'GET', next, { headers: auth(key) });
      const res = await fetch(server.url + next, { headers: auth(key) });
      next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
    }
  }

  // Conditional and compressed answers: the 304 each GET gives for its own tag, and br, gzip and identity bodies.
  for (const path of ['/v1/pets', '/v1/pets?limit=100', '/v1/pets?status=sold&limit=3', '/v1/pets/1']) {
    for (const coding of ['br', 'gzip', 'identity']) {
      const headers = { ...auth(key), 'accept-encoding': coding };
      await checkAnswer(server.url, 'GET', path, { headers });
      const etag = (await fetch(server.url + path, { headers })).headers.get('etag')!;
      for (const method of ['GET', 'HEAD']) await checkAnswer(server.url, method, path, { headers: { ...headers, 'if-none-match': etag } });
    }
  }

  const keys = fc.constantFrom<Record<string, string>>(
    auth(key),
    {},
    auth('pet_live_' + 'A'.repeat(43)),
    auth('not-a-key'),
    auth(staging),
    { authorization: 'Basic dXNlcjpwYXNz' },
    { authorization: `Bearer ${key} extra` },
  );
  const queryValue = fc.oneof(
    fc.constantFrom('1', '20', '100', '0', '101', '-1', '1.5', '1e2', '', 'abc', '٣', '00020'),
    fc.string({ maxLength: 12 }),
  );
  const status = fc.constantFrom('available', 'pending', 'sold', 'adopted', '', 'SOLD');
  const listQuery = fc
    .record(
      {
        limit: queryValue,
        status,
        cursor: fc.oneof(fc.string({ maxLength: 40 }), fc.constant('eyJhIjoxfQ')),
        other: fc.string({ maxLength: 8 }),
      },
      { requiredKeys: [] },
    )
    .map((q) => '/v1/pets?' + new URLSearchParams(q as Record<string, string>).toString());
  const petPath = fc
    .oneof(
      fc.constantFrom('1', '5', '30', '31', '0', '-1', '9223372036854775807', '9223372036854775808', '1.0', 'abc', '%20', '1e3', '０1'),
      fc.bigInt({ min: -10n, max: 2n ** 64n }).map(String),
      fc.string({ minLength: 1, maxLength: 12 }).map(encodeURIComponent),
    )
    .map((id) => `/v1/pets/${id}`);
  const petBody = fc.oneof(
    fc
      .record(
        {
          name: fc.oneof(fc.string({ maxLength: 120 }), fc.constant(''), fc.constant(' '), fc.integer()),
          categoryId: fc.oneof(fc.bigInt({ min: -5n, max: 2n ** 63n + 5n }), fc.double(), fc.string({ maxLength: 5 })),
          status: fc.oneof(status, fc.integer()),
          id: fc.integer(),
          extra: fc.string(),
        },
        { requiredKeys: [] },
      )
      .map((o) => JSON.stringify(o, (_k, v) => (typeof v === 'bigint' ? `@@${v}@@` : v)).replace(/"@@(-?\d+)@@"/g, '$1')),
    fc.constantFrom('', '{', '[]', 'null', '"pet"', '{"name":"a","categoryId":1,"name":"b"}', '{"name":"Rex","categoryId":1}'),
    fc.json(),
  );
  const contentType = fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'text/plain',
    'application/xml',
    '',
    'application/merge-patch+json',
  );

  const request = fc.oneof(
    fc.record({ method: fc.constantFrom('GET', 'HEAD'), path: listQuery, headers: keys }),
    fc.record({ method: fc.constantFrom('GET', 'HEAD'), path: petPath, headers: keys }),
    fc.record({ method: fc.constantFrom('GET', 'HEAD'), path: fc.constant('/v1/openapi.json'), headers: keys }),
    fc.record({ method: fc.constant('POST'), path: fc.constant('/v1/pets'), headers: keys, body: petBody, type: contentType }),
    fc.record({
      method: fc.constantFrom('PUT', 'PATCH', 'DELETE', 'OPTIONS'),
      path: fc.constantFrom('/v1/pets', '/v1/pets/1', '/v1/openapi.json'),
      headers: keys,
    }),
    fc.record({
      method: fc.constantFrom('GET', 'POST'),
      path: fc.constantFrom('/v1', '/v1/', '/v1/dogs', '/v1/pets/1/owner', '/v2/pets', '/pets', '/'),
      headers: keys,
    }),
  );

  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const headers: Record<string, string> = { ...r.headers };
      let body: string | undefined;
      if ('body' in r) {
        body = r.body;
        if (r.type) headers['content-type'] = r.type;
      }
      await checkAnswer(server.url, r.method, r.path, { headers, body });
    }),
    { numRuns: 2000 },
  );

  // The run must have reached the answers the document describes, not only a few of them.
  const seen = [...statusesSeen].join('\n');
  for (const expected of [
    'GET /v1/pets 200',
    'GET /v1/pets 304',
    'GET /v1/pets/{id} 304',
    'HEAD /v1/pets 304',
    'GET /v1/pets 400',
    'GET /v1/pets 401',
    'POST /v1/pets 201',
    'POST /v1/pets 400',
    'POST /v1/pets 401',
    'POST /v1/pets 415',
    'GET /v1/pets/{id} 200',
    'GET /v1/pets/{id} 400',
    'GET /v1/pets/{id} 404',
    'PUT /v1/pets 405',
    'OPTIONS /v1/pets 204',
    'HEAD /v1/pets 200',
    'GET /v1/openapi.json 200',
  ]) {
    assert.ok(seen.includes(expected), `never saw ${expected}; saw:\n${seen}`);
  }
  console.log(`# ${checked} answers checked against openapi.json`);
});
