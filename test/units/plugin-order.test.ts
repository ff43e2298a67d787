/**
 * The order of what every answer shares is written in the plugins' metadata: the API scope and each
 * shared plugin name what must come before them, and the app does not start when one is missing or
 * registered after.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { addressLimits as createAddressLimits } from '../../src/http/api/address-limits.ts';
import { api } from '../../src/http/api/api.ts';
import { hostCheck } from '../../src/http/hooks/host-check.ts';
import { observation } from '../../src/http/hooks/observation.ts';
import { requestIds } from '../../src/http/hooks/request-ids.ts';
import { securityHeaders } from '../../src/http/hooks/security-headers.ts';
import { MemoryRateLimiter } from '../../src/limits/memory.ts';
import { createMetrics } from '../../src/metrics.ts';

/** The address's limit that the answers before any key is read carry, as the app makes it. */
const beforeKeys = () => createAddressLimits(new MemoryRateLimiter(), 60, { kind: 'none' });

const notRegistered = (name: string) => (err: unknown) => {
  assert.equal((err as { code?: string }).code, 'FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED');
  assert.match((err as Error).message, new RegExp(`'${name}'`));
  return true;
};

test('the Host check refuses to start before the baseline headers it must follow', async () => {
  const app = Fastify();
  await assert.rejects(async () => {
    await app.register(hostCheck, { addressLimits: beforeKeys() });
    await app.ready();
  }, notRegistered('security-headers'));
});

test('the baseline headers refuse to start before the request id', async () => {
  const app = Fastify();
  await assert.rejects(async () => {
    await app.register(securityHeaders, { corsOrigins: [], apiMethods: () => '', addressLimits: beforeKeys() });
    await app.ready();
  }, notRegistered('request-ids'));
});

test('the request log refuses to start before the request fields it reads are declared', async () => {
  const app = Fastify();
  await assert.rejects(async () => {
    await app.register(observation, { metrics: createMetrics() });
    await app.ready();
  }, notRegistered('client-address'));
});

test('the API scope refuses to start before the shared plugins it inherits', async () => {
  const app = Fastify();
  await app.register(requestIds);
  await assert.rejects(async () => {
    await app.register(api, { prefix: '/v1' } as never);
    await app.ready();
  }, notRegistered('draining'));
});
