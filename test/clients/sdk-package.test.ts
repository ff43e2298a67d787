/**
 * The SDK as its users get it: `npm pack` in client/ (whose prepack script cleans and builds dist/),
 * the tarball installed into a scratch project, offline, and used from there by its package name, so
 * that what is checked is the published shape (exports, files, types), not the source tree. A plain
 * .mjs script lists, creates (idempotently) and gets pets against a live server, with the base URL
 * given both ways (ending in /v1, and the bare origin); the compiler checks a TypeScript consumer
 * with web types only, under both module resolutions a project is likely to use.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { keysCreate, startServerProcess } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLIENT = join(ROOT, 'client');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

interface PackResult {
  filename: string;
  name: string;
  version: string;
  files: { path: string }[];
}

/** npm, run by the Node.js running the tests, with its cache in the test's directory and no network. */
function npm(args: string[], cwd: string, cache: string) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`,
    npm_config_cache: cache,
  };
  // An npm test run's own settings (npm_config_*) would otherwise apply to this npm too.
  for (const name of Object.keys(env)) if (name.startsWith('npm_config_') && name !== 'npm_config_cache') delete env[name];
  return run('npm', args, { cwd, env, maxBuffer: 16 * 1024 * 1024 });
}

/** The package's consumer, an ES module that knows nothing of this repository. */
const SCRIPT = `
import { PetstoreClient, PetstoreError } from '@petstore/client';

const { PETSTORE_URL, PETSTORE_KEY } = process.env;
const versioned = new PetstoreClient({ baseUrl: PETSTORE_URL + '/v1', apiKey: PETSTORE_KEY });
const bare = new PetstoreClient({ baseUrl: PETSTORE_URL, apiKey: PETSTORE_KEY });

const first = await versioned.createPet({ name: 'Packed', categoryId: 9223372036854775807n }, { idempotencyKey: 'sdk-package-1' });
const again = await bare.createPet({ name: 'Packed', categoryId: 9223372036854775807n }, { idempotencyKey: 'sdk-package-1' });
const second = await bare.createPet({ name: 'Unkeyed', categoryId: 2, status: 'pending' });
const got = await versioned.getPet(first.id);
const listed = [];
for await (const pet of versioned.listPets({ limit: 1 })) listed.push(pet);
const pending = [];
for await (const pet of bare.listPets({ status: 'pending' })) pending.push(pet.name);
let missing;
try {
  await bare.getPet(first.id + 1000n);
} catch (err) {
  missing = { isPetstoreError: err instanceof PetstoreError, status: err.status, code: err.code, hasRequestId: typeof err.requestId === 'string' };
}
let deepImport;
try {
  await import('@petstore/client/dist/index.js');
  deepImport = 'imported';
} catch (err) {
  deepImport = err.code;
}
const bigints = (_key, value) => (typeof value === 'bigint' ? value.toString() + 'n' : value);
console.log(JSON.stringify({ first, again, second, got, listed, pending, missing, deepImport }, bigints));
`;

/** A TypeScript consumer: the package's types resolve, ids are bigint, statuses are the API's. */
const CONSUMER = `
import { PetstoreClient, PetstoreError, type Pet, type PetstoreErrorInit } from '@petstore/client';

const client = new PetstoreClient({ baseUrl: new URL('https://api.example.com/v1'), apiKey: 'pet_live_x' });
export async function firstAvailable(): Promise<bigint | undefined> {
  for await (const pet of client.listPets({ status: 'available' })) {
    const exact: Pet['id'] = pet.id;
    return exact;
  }
  return undefined;
}
const init: PetstoreErrorInit = { status: 404, code: 'not_found', message: 'No such pet' };
export const error = new PetstoreError(init);
// @ts-expect-error -- not one of the API's statuses
client.listPets({ status: 'adopted' });
`;

test(
  'the packed SDK installs offline by name and lists, creates idempotently and gets pets from a live server',
  { timeout: 180_000 },
  async (t) => {
    // What the test starts is stopped in reverse order when it ends: the server before its directory.
    const dir = tempDir(t);
    const cache = join(dir, 'npm-cache');

    // npm pack runs the prepack script, which cleans dist/ and builds it, so nothing stale is packed.
    const packed = await npm(['pack', '--json', '--pack-destination', dir], CLIENT, cache);
    const [pack] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('[\n'))) as PackResult[];
    assert.ok(pack);
    assert.equal(pack.name, '@petstore/client');
    const files = pack.files.map((f) => f.path).sort();
    for (const wanted of ['package.json', 'README.md', 'CHANGELOG.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts', 'dist/schema.d.ts']) {
      assert.ok(files.includes(wanted), `the package holds ${wanted}: ${files.join(', ')}`);
    }
    const unwanted = files.filter(
      (f) => !/^dist\/[\w.-]+\.(js|js\.map|d\.ts)$/.test(f) && !['package.json', 'README.md', 'CHANGELOG.md', 'LICENSE'].includes(f),
    );
    assert.deepEqual(unwanted, [], 'only the build, its documents and the licence are packed (no sources, tests or build state)');

    // A scratch project that installs the tarball: no dependencies, so no registry is asked (--offline).
    const app = join(dir, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'sdk-consumer', private: true, type: 'module' }));
    await npm(['install', '--offline', '--no-audit', '--no-fund', join(dir, pack.filename)], app, cache);

    const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` };
    const key = await keysCreate(env, '--plan', 'pro');
    const server = await startServerProcess(env, { owner: t });

    writeFileSync(join(app, 'use.mjs'), SCRIPT);
    const scriptEnv: NodeJS.ProcessEnv = { ...process.env, PETSTORE_URL: server.url, PETSTORE_KEY: key };
    delete scriptEnv.NODE_TEST_CONTEXT; // the script is no test of this run
    const used = await run(process.execPath, ['use.mjs'], { cwd: app, env: scriptEnv });
    const out = JSON.parse(used.stdout);
    const exact = { name: 'Packed', categoryId: '9223372036854775807n', status: 'available' };
    assert.deepEqual(out.first, { ...exact, id: out.first.id, replayed: false });
    assert.deepEqual(
      out.again,
      { ...out.first, replayed: true },
      'the same Idempotency-Key, through the bare origin, replays the same pet',
    );
    assert.match(out.second.id, /^\d+n$/);
    assert.notEqual(out.second.id, out.first.id);
    assert.equal(out.second.replayed, false);
    assert.deepEqual(out.got, { ...exact, id: out.first.id });
    assert.deepEqual(
      out.listed.map((p: { name: string }) => p.name),
      ['Packed', 'Unkeyed'],
      'two pages of one, followed by their next links',
    );
    assert.deepEqual(out.pending, ['Unkeyed']);
    assert.deepEqual(out.missing, { isPetstoreError: true, status: 404, code: 'not_found', hasRequestId: true });
    assert.equal(out.deepImport, 'ERR_PACKAGE_PATH_NOT_EXPORTED', 'only what exports names can be imported');

    // Its types, from the installed package, for a consumer with web types only (no @types/node), its
    // declaration files checked too (skipLibCheck off).
    writeFileSync(join(app, 'consumer.ts'), CONSUMER);
    for (const [module, moduleResolution] of [
      ['nodenext', 'nodenext'],
      ['esnext', 'bundler'],
    ]) {
      const compilerOptions = { noEmit: true, strict: true, target: 'ES2022', lib: ['ES2022', 'DOM'], types: [], module, moduleResolution };
      const config = `tsconfig.${moduleResolution}.json`;
      writeFileSync(join(app, config), JSON.stringify({ compilerOptions, files: ['consumer.ts'] }));
      const checked = await run(process.execPath, [TSC, '-p', config], { cwd: app }).catch((err: { stdout: string }) => err);
      assert.equal(checked.stdout, '', `tsc -p ${config}`);
    }
  },
);
