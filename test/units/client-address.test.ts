/**
 * Client addresses, as the per-address limits count them and the log shows them: normalised forms,
 * X-Forwarded-For read from the right and only as far as TRUST_PROXY says, nothing but IP addresses.
 * The same through real HTTP behind nginx: deployment/proxy-nginx.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { addressBucket, normaliseAddress, resolveClientAddress } from '../../src/domain/addresses.ts';

const trust = (value: string) => loadConfig({ TRUST_PROXY: value }).trustProxy;

test('addresses are written one way: IPv4-mapped IPv6 as IPv4, IPv6 canonical, ports and brackets dropped', () => {
  assert.equal(normaliseAddress('::ffff:192.0.2.1'), '192.0.2.1');
  assert.equal(normaliseAddress('::FFFF:c000:0201'), '192.0.2.1');
  assert.equal(normaliseAddress('2001:DB8:0:0:0:0:0:1'), '2001:db8::1');
  assert.equal(normaliseAddress('[2001:db8::1]:443'), '2001:db8::1');
  assert.equal(normaliseAddress(' 192.0.2.1:8080 '), '192.0.2.1');
  for (const bad of ['', 'unknown', 'evil.example', '192.0.2.256', '01.2.3.4', 'fe80::1%eth0', '1.2.3.4, 5.6.7.8', '<script>']) {
    assert.equal(normaliseAddress(bad), undefined, bad);
  }
});

test('one IPv6 client is one /64; IPv4 addresses are their own bucket', () => {
  assert.equal(addressBucket('2001:db8:1:2::1'), addressBucket('2001:db8:1:2:ffff:ffff:ffff:ffff'));
  assert.notEqual(addressBucket('2001:db8:1:2::1'), addressBucket('2001:db8:1:3::1'));
  assert.equal(addressBucket('2001:db8:1:2::1'), '2001:db8:1:2::/64');
  assert.equal(addressBucket('::1'), '0:0:0:0::/64');
  assert.equal(addressBucket('192.0.2.1'), '192.0.2.1');
});

test('without TRUST_PROXY X-Forwarded-For is ignored', () => {
  assert.equal(resolveClientAddress('::ffff:10.0.0.1', '203.0.113.5', trust('')), '10.0.0.1');
  assert.equal(resolveClientAddress(undefined, undefined, trust('false')), 'unknown');
});

test('a hop count believes that many entries from the right, and nothing a client wrote', () => {
  const one = trust('1');
  assert.equal(resolveClientAddress('10.0.0.1', '198.51.100.7, 203.0.113.5', one), '203.0.113.5');
  assert.equal(resolveClientAddress('10.0.0.1', ['198.51.100.7', '203.0.113.5'], one), '203.0.113.5', 'repeated fields are one list');
  assert.equal(resolveClientAddress('10.0.0.1', undefined, one), '10.0.0.1', 'a request that bypassed the proxy');
  assert.equal(resolveClientAddress('10.0.0.1', '203.0.113.5, 10.0.0.2', trust('2')), '203.0.113.5');
  // An entry that is not an address ends the walk at the last good one: no string becomes a bucket.
  assert.equal(resolveClientAddress('10.0.0.1', 'not-an-address', one), '10.0.0.1');
  assert.equal(resolveClientAddress('10.0.0.1', `x, ${'a'.repeat(1000)}`, one), '10.0.0.1');
});

test('a proxy list believes entries only while they come from a listed proxy', () => {
  const listed = trust('10.0.0.0/8, 192.0.2.1, loopback');
  assert.equal(resolveClientAddress('10.1.1.1', '203.0.113.5', listed), '203.0.113.5');
  assert.equal(resolveClientAddress('10.1.1.1', '198.51.100.1, 203.0.113.5, 192.0.2.1', listed), '203.0.113.5');
  assert.equal(resolveClientAddress('203.0.113.9', '198.51.100.1', listed), '203.0.113.9', 'a peer that is no proxy is the client');
  assert.equal(resolveClientAddress('::1', '::ffff:203.0.113.5', listed), '203.0.113.5');
});

test('TRUST_PROXY=true is refused: it would believe what the client writes', () => {
  assert.throws(() => trust('true'), /TRUST_PROXY=true would believe any address a client writes/);
});
