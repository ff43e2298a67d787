/**
 * The built-in HTTPS listener: with TLS_CERT and TLS_KEY (a self-signed certificate made here) the
 * server answers the API over TLS to a client that trusts that certificate, and does not answer
 * plain HTTP on the same port. One of the pair alone, or an unreadable file, stops the server at
 * start with one clear line. SIGHUP reads the pair again, in every worker of a process that runs several.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { connect } from 'node:tls';
import { freePort, keysCreate, runCli, startServerProcess } from '../support/processes.ts';
import { request } from '../support/raw-http.ts';
import { tempDir } from '../support/temp.ts';
import { eventually } from '../support/waiting.ts';

function selfSigned(dir: string, name = '', days = 1): { cert: string; key: string } {
  const cert = join(dir, `cert${name}.pem`);
  const key = join(dir, `key${name}.pem`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      String(days),
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}

test('TLS_CERT and TLS_KEY: the API over HTTPS, and no answer to plain HTTP', async (t) => {
  const dir = tempDir(t);
  const { cert, key } = selfSigned(dir);
  const ca = readFileSync(cert);
  const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, TLS_CERT: cert, TLS_KEY: key };
  const apiKey = await keysCreate(env, '--plan', 'free');
  const server = await startServerProcess(env, {
    scheme: 'https',
    isReady: async (url) => (await request(`${url}/healthz`, { ca })).status === 200,
    owner: t,
  });
  const listed = await request(`${server.url}/v1/pets`, { ca, headers: { authorization: `Bearer ${apiKey}` } });
  assert.equal(listed.status, 200);
  assert.equal(listed.body, '[]');
  // An untrusted client refuses the self-signed certificate: the connection is really TLS.
  await assert.rejects(fetch(`${server.url}/healthz`));
  // Plain HTTP to the TLS port gets no API answer.
  const plain = await fetch(server.url.replace('https:', 'http:') + '/healthz').then(
    (r) => r.status,
    () => 'no answer',
  );
  assert.notEqual(plain, 200);
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);
});

test('one of TLS_CERT and TLS_KEY alone, or an unreadable file, stops the server with one line', async (t) => {
  const dir = tempDir(t);
  const db = `sqlite:${join(dir, 'petstore.db')}`;
  const alone = await runCli(['serve'], { DATABASE_URL: db, TLS_CERT: join(dir, 'cert.pem') });
  assert.equal(alone.code, 1);
  assert.match(alone.stderr, /TLS_CERT and TLS_KEY must be set together/);
  assert.equal(alone.stderr.trim().split('\n').length, 1);
  const missing = await runCli(['serve'], {
    DATABASE_URL: db,
    TLS_CERT: join(dir, 'nope.pem'),
    TLS_KEY: join(dir, 'nope.key'),
    PORT: '0',
  });
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /TLS_CERT cannot be read/);
});

/** The SHA-256 fingerprint of the certificate a new TLS connection to url is shown. */
function certificateShown(url: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.end();
    });
    socket.on('error', reject);
  });
}

test('SIGHUP reads TLS_CERT and TLS_KEY again: new connections get the renewed pair; a pair that does not match keeps the one in use', async (t) => {
  const dir = tempDir(t);
  const { cert, key } = selfSigned(dir);
  copyFileSync(key, join(dir, 'key.pem.first'));
  const renewed = selfSigned(dir, '-renewed', 30);
  const fingerprintOf = (path: string) => new X509Certificate(readFileSync(path)).fingerprint256;
  const endOf = (path: string) => Date.parse(new X509Certificate(readFileSync(path)).validTo) / 1000;
  const first = fingerprintOf(cert);
  const firstEnd = endOf(cert);
  const metricsPort = await freePort();
  const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, TLS_CERT: cert, TLS_KEY: key, METRICS_PORT: String(metricsPort) };
  // petstore_tls_certificate_expiry_timestamp_seconds: when the certificate in use ends (PetstoreTlsCertificateExpiring).
  const expiryShown = async () => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    return Number(/^petstore_tls_certificate_expiry_timestamp_seconds (\S+)$/m.exec(text)?.[1]);
  };
  const ca = readFileSync(cert);
  const server = await startServerProcess(env, {
    scheme: 'https',
    isReady: async (url) => (await request(`${url}/healthz`, { ca })).status === 200,
    owner: t,
  });
  assert.equal(await certificateShown(server.url), first);
  assert.equal(await expiryShown(), firstEnd);

  // Renewed in place, as certbot or a mounted Secret does: the new pair, then the signal.
  copyFileSync(renewed.cert, cert);
  copyFileSync(renewed.key, key);
  server.child.kill('SIGHUP');
  await eventually(async () => (await certificateShown(server.url)) === fingerprintOf(renewed.cert), 5000, 50);
  await eventually(async () => server.stdout().includes('"msg":"TLS certificate reloaded"'), 5000, 50);
  assert.match(server.stdout(), /"certificateValidUntil":"\d{4}-\d\d-\d\dT/);
  assert.equal((await request(`${server.url}/healthz`, { ca: readFileSync(cert) })).status, 200, 'served with the new pair');
  assert.equal(await expiryShown(), endOf(renewed.cert), 'the gauge follows the certificate in use');
  assert.ok(endOf(renewed.cert) - firstEnd > 28 * 86400);

  // A key that is not the certificate's: refused, and the pair in use stays.
  copyFileSync(join(dir, 'key.pem.first'), key);
  server.child.kill('SIGHUP');
  await eventually(async () => server.stdout().includes('TLS certificate not reloaded'), 5000, 50);
  assert.match(server.stdout(), /"msg":"TLS certificate not reloaded: the one in use is kept"/);
  assert.match(server.stdout(), /key values mismatch/);
  assert.equal(await certificateShown(server.url), fingerprintOf(renewed.cert));
  assert.equal(await expiryShown(), endOf(renewed.cert), 'a refused pair leaves the gauge on the one in use');
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0, 'SIGHUP did not end it');
});

test('with four workers, SIGHUP reloads the pair in every one: every new connection gets the renewed certificate', async (t) => {
  const dir = tempDir(t);
  const { cert, key } = selfSigned(dir);
  const renewed = selfSigned(dir, '-renewed', 30);
  const fingerprintOf = (path: string) => new X509Certificate(readFileSync(path)).fingerprint256;
  const env = { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`, TLS_CERT: cert, TLS_KEY: key, WORKERS: '4' };
  const ca = readFileSync(cert);
  const server = await startServerProcess(env, {
    scheme: 'https',
    isReady: async (url) => (await request(`${url}/healthz`, { ca })).status === 200,
    owner: t,
  });
  await eventually(async () => server.stdout().includes('4 workers)'), 30_000, 50);
  copyFileSync(renewed.cert, cert);
  copyFileSync(renewed.key, key);
  server.child.kill('SIGHUP');
  await eventually(async () => server.stdout().split('"msg":"TLS certificate reloaded"').length - 1 === 4, 10_000, 50);
  // Each connection may reach any worker: forty new ones, every one shown the renewed certificate.
  const shown = await Promise.all(Array.from({ length: 40 }, () => certificateShown(server.url)));
  assert.deepEqual(new Set(shown), new Set([fingerprintOf(renewed.cert)]));
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);
});

test('without TLS, SIGHUP (systemctl reload) is logged and ends nothing', async (t) => {
  const dir = tempDir(t);
  const server = await startServerProcess({ DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` }, { owner: t });
  server.child.kill('SIGHUP');
  await eventually(async () => server.stdout().includes('SIGHUP: nothing to reload without TLS_CERT'), 5000, 50);
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200, 'still serving');
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);
});
