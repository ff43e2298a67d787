/** The pure domain rules: cursors and their MAC, API keys, exact JSON integers, id order, pet field checks and a pet's JSON. No I/O. */
import assert from 'node:assert/strict';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { environmentOfKey, formatOfKey, hashKey, issueKey } from '../../src/domain/api-key.ts';
import { HashPrefixSet } from '../../src/domain/hash-prefix-set.ts';
import { KeyTags, TAG_LENGTH } from '../../src/domain/key-tags.ts';
import { CursorCodec, type CursorPosition } from '../../src/domain/cursor.ts';
import { hmacSha256, MAC_MESSAGE_MAX } from '../../src/domain/hmac.ts';
import { inDecimalOrder, INT64_MAX, isPositiveInt64 } from '../../src/domain/int64.ts';
import { nameProblem, PET_STATUSES } from '../../src/domain/pet.ts';
import { petJson, petsJson } from '../../src/domain/pet-json.ts';
import { exactInteger, exactTopLevelIntegers } from '../../src/http/hooks/json-bodies.ts';

const SECRET = 'a'.repeat(64);
const TAGS = new KeyTags(SECRET);
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

describe('CursorCodec', () => {
  const codec = new CursorCodec(SECRET);

  test('a cursor without a status decodes to the position it was made from', () => {
    const position: CursorPosition = { afterId: 42n, status: undefined };
    const cursor = codec.encode(position);
    assert.match(cursor, BASE64URL);
    assert.deepEqual(codec.decode(cursor), position);
  });

  for (const status of PET_STATUSES) {
    test(`a cursor with status ${status} decodes to the position it was made from`, () => {
      const position: CursorPosition = { afterId: 7n, status };
      assert.deepEqual(codec.decode(codec.encode(position)), position);
    });
  }

  test('the extremes of the id range round-trip exactly', () => {
    for (const afterId of [1n, 9007199254740993n, INT64_MAX]) {
      for (const status of [undefined, 'sold'] as const) {
        assert.deepEqual(codec.decode(codec.encode({ afterId, status })), { afterId, status });
      }
    }
  });

  test('a cursor is accepted by another codec with the same secret (another instance)', () => {
    const cursor = codec.encode({ afterId: 5n, status: 'pending' });
    assert.deepEqual(new CursorCodec(SECRET).decode(cursor), { afterId: 5n, status: 'pending' });
  });

  test('cursors for different positions or filters differ', () => {
    const cursors = new Set([
      codec.encode({ afterId: 1n, status: undefined }),
      codec.encode({ afterId: 2n, status: undefined }),
      codec.encode({ afterId: 1n, status: 'available' }),
      codec.encode({ afterId: 1n, status: 'sold' }),
    ]);
    assert.equal(cursors.size, 4);
  });

  test('decode rejects a cursor with any one character changed', () => {
    for (const position of [
      { afterId: 123456789n, status: undefined },
      { afterId: 3n, status: 'available' as const },
    ]) {
      const cursor = codec.encode(position);
      for (let i = 0; i < cursor.length; i++) {
        const at = ALPHABET.indexOf(cursor[i]!);
        // Two different substitutes per position: the neighbour and the character half the alphabet away.
        for (const shift of [1, 32]) {
          const flipped = cursor.slice(0, i) + ALPHABET[(at + shift) % 64]! + cursor.slice(i + 1);
          assert.equal(codec.decode(flipped), undefined, `changed position ${i} of ${cursor} to ${flipped}`);
        }
      }
    }
  });

  test('decode rejects a cursor made with a different secret', () => {
    const other = new CursorCodec('b'.repeat(64));
    const cursor = other.encode({ afterId: 10n, status: undefined });
    assert.equal(codec.decode(cursor), undefined);
    assert.equal(codec.decode(other.encode({ afterId: 10n, status: 'sold' })), undefined);
  });

  test('decode rejects random base64url strings', () => {
    for (let n = 0; n < 200; n++) {
      const random = randomBytes(1 + (n % 40)).toString('base64url');
      assert.equal(codec.decode(random), undefined, random);
    }
  });

  test('decode rejects the empty string', () => {
    assert.equal(codec.decode(''), undefined);
  });

  test('decode rejects very long strings', () => {
    assert.equal(codec.decode('A'.repeat(10_000)), undefined);
    assert.equal(codec.decode(randomBytes(3_000).toString('base64url')), undefined);
    // A valid cursor padded out with base64url characters is no longer valid.
    const cursor = codec.encode({ afterId: 1n, status: undefined });
    assert.equal(codec.decode(cursor + 'A'.repeat(1_000)), undefined);
    assert.equal(codec.decode(cursor + 'AAAA'), undefined);
  });

  test('decode rejects characters outside base64url', () => {
    const cursor = codec.encode({ afterId: 99n, status: 'pending' });
    const variants = [
      cursor + '=',
      cursor + '==',
      cursor.replaceAll('-', '+').replaceAll('_', '/') + (cursor.includes('-') || cursor.includes('_') ? '' : '+'),
      ' ' + cursor,
      cursor + '\n',
      cursor.slice(0, 4) + '.' + cursor.slice(5),
      cursor.slice(0, 4) + 'é' + cursor.slice(5),
      cursor.slice(0, 4) + '%2B' + cursor.slice(5),
      '!!!!',
      '\u0000',
    ];
    for (const v of variants) assert.equal(codec.decode(v), undefined, JSON.stringify(v));
  });

  test('decode rejects a non-canonical spelling of a valid cursor', () => {
    // Base64 leaves some low bits of the last character unused; a different spelling of the same
    // bytes is not a cursor the service issued.
    for (let afterId = 1n; afterId < 40n; afterId++) {
      const cursor = codec.encode({ afterId, status: undefined });
      const raw = Buffer.from(cursor, 'base64url');
      for (const c of ALPHABET) {
        const variant = cursor.slice(0, -1) + c;
        if (variant === cursor) continue;
        if (Buffer.from(variant, 'base64url').equals(raw)) assert.equal(codec.decode(variant), undefined, variant);
      }
    }
  });

  test('decode rejects correctly signed payloads that the encoder never produces', () => {
    // Signed the way the codec signs (HMAC-SHA256 truncated to 12 bytes), so only the payload check can refuse them.
    const sign = (payload: string) => {
      const p = Buffer.from(payload, 'utf8');
      const mac = createHmac('sha256', Buffer.from(SECRET, 'utf8')).update(p).digest().subarray(0, 12);
      return Buffer.concat([p, mac]).toString('base64url');
    };
    assert.deepEqual(codec.decode(sign('5:sold')), { afterId: 5n, status: 'sold' }, 'the signing helper matches the codec');
    // The codec writes them byte for byte as the helper does: cursors from instances of any release decode on every other.
    for (const [afterId, status] of [
      [5n, 'sold'],
      [9007199254740993n, undefined],
      [1n, 'available'],
    ] as const)
      assert.equal(codec.encode({ afterId, status }), sign(`${afterId}:${status ?? ''}`));
    for (const payload of ['0:', '05:', '-1:', '1', ':', '1:unknown', '1:sold:', 'x:', '12345678901234567890:', '1:Sold', '']) {
      assert.equal(codec.decode(sign(payload)), undefined, JSON.stringify(payload));
    }
  });
});

describe('hmacSha256', () => {
  test('equals node:crypto createHmac for keys shorter than, equal to and longer than the 64-byte block, and messages up to the limit', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.uint8Array({ maxLength: MAC_MESSAGE_MAX }), (key, bytes) => {
        const message = Buffer.from(bytes).toString('latin1'); // every byte value, one character each
        const expected = createHmac('sha256', key).update(bytes).digest('latin1');
        assert.equal(hmacSha256(Buffer.from(key))(message), expected);
      }),
      {
        numRuns: 500,
        examples: [
          [new Uint8Array(64).fill(7), new Uint8Array(0)],
          [new Uint8Array(65).fill(7), new Uint8Array(MAC_MESSAGE_MAX).fill(255)],
        ],
      },
    );
  });

  test('the same MAC every time: nothing of a longer message stays behind for a shorter one', () => {
    const mac = hmacSha256(Buffer.from(SECRET));
    const first = mac('20:sold');
    mac('a much longer message than the first one, to leave something behind if anything were kept');
    assert.equal(mac('20:sold'), first);
  });

  test('refuses a message longer than the limit rather than cut it', () => {
    const mac = hmacSha256(Buffer.from(SECRET));
    assert.throws(() => mac('x'.repeat(MAC_MESSAGE_MAX + 1)), RangeError);
  });
});

describe('inDecimalOrder', () => {
  test('puts canonical decimal ids in numeric order, shorter before longer', () => {
    assert.deepEqual(inDecimalOrder(['10', '9', '100', '11', '1']), ['1', '9', '10', '11', '100']);
    assert.deepEqual(inDecimalOrder([String(INT64_MAX), '2', '9223372036854775806']), ['2', '9223372036854775806', String(INT64_MAX)]);
  });

  test('returns ids already in order as they are', () => {
    const ids = ['1', '2', '30', '400'];
    assert.equal(inDecimalOrder(ids), ids);
    assert.deepEqual(inDecimalOrder([]), []);
  });

  test('agrees with bigint order on any ids', () => {
    fc.assert(
      fc.property(fc.array(fc.bigInt({ min: 1n, max: INT64_MAX })), (values) => {
        const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map(String);
        assert.deepEqual(inDecimalOrder(values.map(String)), sorted);
      }),
      { numRuns: 300 },
    );
  });
});

describe('issueKey', () => {
  test('production keys start with pet_live_ and staging keys with pet_test_', () => {
    assert.ok(issueKey('production', TAGS).key.startsWith('pet_live_'));
    assert.ok(issueKey('staging', TAGS).key.startsWith('pet_test_'));
  });

  test('the secret part is base64url with at least 128 bits (22 characters) of randomness', () => {
    for (const environment of ['production', 'staging'] as const) {
      const { key } = issueKey(environment, TAGS);
      const secret = key.slice('pet_live_'.length, -TAG_LENGTH);
      assert.match(secret, BASE64URL);
      assert.ok(secret.length >= 22, `secret part has ${secret.length} characters`);
      assert.ok(Buffer.from(secret, 'base64url').length >= 16);
    }
  });

  test('1000 issued keys, ids and hashes are all distinct', () => {
    const keys = new Set<string>();
    const ids = new Set<string>();
    const hashes = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const issued = issueKey(i % 2 ? 'production' : 'staging', TAGS);
      keys.add(issued.key);
      ids.add(issued.id);
      hashes.add(issued.hash);
    }
    assert.equal(keys.size, 1000);
    assert.equal(ids.size, 1000);
    assert.equal(hashes.size, 1000);
  });

  test('the issued hash is the hash of the key, and the prefix is the key start with a few secret characters', () => {
    const issued = issueKey('production', TAGS);
    assert.equal(issued.hash, hashKey(issued.key));
    assert.ok(issued.key.startsWith(issued.prefix));
    assert.ok(issued.prefix.length > 'pet_live_'.length, 'the prefix shows part of the secret');
    assert.ok(issued.prefix.length < 'pet_live_'.length + 22, 'the prefix does not show most of the secret');
  });

  test('the public id does not reveal the key', () => {
    const issued = issueKey('staging', TAGS);
    assert.match(issued.id, /^key_[0-9a-f]{16}$/);
    assert.ok(!issued.key.includes(issued.id.slice(4)));
  });
});

describe('KeyTags', () => {
  test("an issued key ends in its tag: it passes with its database's secret, and with no other", () => {
    const other = new KeyTags('b'.repeat(64));
    for (const environment of ['production', 'staging'] as const) {
      const { key } = issueKey(environment, TAGS);
      assert.equal(formatOfKey(key, environment), 'tagged');
      assert.equal(key.slice(-TAG_LENGTH), TAGS.tagOf(key.slice(0, -TAG_LENGTH)));
      assert.ok(TAGS.verify(key));
      assert.ok(new KeyTags(SECRET).verify(key), 'another process with the same secret checks it the same');
      assert.equal(other.verify(key), false);
      assert.equal(other.verify(issueKey(environment, other).key), true);
    }
  });

  test('changing any one character of a tagged key, its prefix, random part or tag, fails its tag', () => {
    const { key } = issueKey('production', TAGS);
    for (let i = 0; i < key.length; i++) {
      for (const c of ['A', 'z', '_']) {
        if (key[i] === c) continue;
        const changed = key.slice(0, i) + c + key.slice(i + 1);
        assert.equal(TAGS.verify(changed), false, `character ${i} changed to ${c}`);
      }
    }
  });

  test('made-up tags almost never pass: none of 10,000', () => {
    const body = 'pet_live_' + randomBytes(32).toString('base64url');
    for (let i = 0; i < 10_000; i++) assert.equal(TAGS.verify(body + randomBytes(8).toString('base64url')), false);
  });

  test("a tag is not the cursor's MAC of the same text, though both come from one secret", () => {
    const body = 'pet_live_' + randomBytes(32).toString('base64url');
    const cursorMac = createHmac('sha256', SECRET).update(body).digest().subarray(0, 8).toString('base64url');
    assert.notEqual(TAGS.tagOf(body), cursorMac);
  });
});

describe('formatOfKey', () => {
  test('tells tagged keys, untagged keys (issued before tags) and lengths no key is issued with apart', () => {
    const untagged = 'pet_live_' + randomBytes(32).toString('base64url');
    assert.equal(formatOfKey(untagged, 'production'), 'untagged');
    assert.equal(formatOfKey(issueKey('production', TAGS).key, 'production'), 'tagged');
    for (const key of ['pet_live_', 'pet_live_abc', untagged + 'x', untagged.slice(0, -1), untagged + 'x'.repeat(TAG_LENGTH + 1)]) {
      assert.equal(formatOfKey(key, 'production'), undefined, key);
    }
  });
});

describe('HashPrefixSet', () => {
  test('has every hash it was given, and none of 10,000 others', () => {
    const given = Array.from({ length: 1000 }, () => hashKey(randomBytes(32).toString('hex')));
    const set = new HashPrefixSet(given);
    assert.equal(set.size, 1000);
    for (const hash of given) assert.ok(set.has(hash));
    for (let i = 0; i < 10_000; i++) assert.equal(set.has(hashKey(randomBytes(32).toString('hex'))), false);
    assert.equal(new HashPrefixSet([]).has(given[0]!), false);
  });
});

describe('hashKey', () => {
  test('is SHA-256 in lower-case hex', () => {
    assert.equal(hashKey('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const { key } = issueKey('production', TAGS);
    assert.equal(hashKey(key), createHash('sha256').update(key).digest('hex'));
    assert.match(hashKey(key), /^[0-9a-f]{64}$/);
  });

  test('differs from the key and is deterministic', () => {
    const { key } = issueKey('production', TAGS);
    assert.notEqual(hashKey(key), key);
    assert.ok(!hashKey(key).includes(key.slice(9)));
    assert.equal(hashKey(key), hashKey(key));
    assert.notEqual(hashKey(key), hashKey(key + 'x'));
  });
});

describe('environmentOfKey', () => {
  test('names the environment of an issued key', () => {
    assert.equal(environmentOfKey(issueKey('production', TAGS).key), 'production');
    assert.equal(environmentOfKey(issueKey('staging', TAGS).key), 'staging');
  });

  test('reads only the prefix', () => {
    assert.equal(environmentOfKey('pet_live_'), 'production');
    assert.equal(environmentOfKey('pet_test_anything'), 'staging');
  });

  test('is undefined for keys without a known prefix', () => {
    for (const key of ['', 'pet_', 'pet_live', 'PET_LIVE_abc', 'xpet_live_abc', ' pet_live_abc', 'pet_prod_abc', 'sk_live_abc']) {
      assert.equal(environmentOfKey(key), undefined, JSON.stringify(key));
    }
  });
});

describe('exactInteger', () => {
  const cases: [string, bigint | undefined][] = [
    ['1', 1n],
    ['0', 0n],
    ['-0', 0n],
    ['-5', -5n],
    ['1.0', 1n],
    ['1.000', 1n],
    ['1e3', 1000n],
    ['1E3', 1000n],
    ['1e+3', 1000n],
    ['1e0', 1n],
    ['1.5e1', 15n],
    ['100e-2', 1n],
    ['12.50e1', 125n],
    ['1.5', undefined],
    ['15e-1', undefined],
    ['0.1', undefined],
    ['-2.5', undefined],
    ['1.000000000000000000001', undefined],
    ['1e-400', undefined],
    ['9223372036854775807', 9223372036854775807n],
    ['9223372036854775808', 9223372036854775808n],
    ['9007199254740993', 9007199254740993n],
    ['9223372036854775807.0', 9223372036854775807n],
    ['922337203685477580.7e1', 9223372036854775807n],
    ['-9223372036854775808', -9223372036854775808n],
    // Every digit dropped by the exponent is a zero, the sign with them.
    ['0e-1', 0n],
    ['-0e-1', 0n],
    ['-0.0e-5', 0n],
    // Forty digits by an exponent, and any number of digits written out, are kept exactly.
    ['1e39', 10n ** 39n],
    ['1' + '0'.repeat(41), 10n ** 41n],
  ];
  for (const [literal, expected] of cases) {
    test(`${literal} is ${expected === undefined ? 'not an integer' : `exactly ${expected}`}`, () => {
      assert.equal(exactInteger(literal), expected);
    });
  }

  test('1e400 is larger than any int64, without building a 400-digit number', () => {
    const value = exactInteger('1e400');
    assert.ok(value !== undefined && value > 2n ** 63n);
    const huge = exactInteger('1e999999999');
    assert.ok(huge !== undefined && huge > 2n ** 63n);
    const negative = exactInteger('-1e400');
    assert.ok(negative !== undefined && negative < -(2n ** 63n));
  });

  test('more than 40 digits made by an exponent are taken as 10^40, with the sign: far outside int64 either way', () => {
    assert.equal(exactInteger('1' + '0'.repeat(40) + 'e1'), 10n ** 40n);
    assert.equal(exactInteger('5e40'), 10n ** 40n);
    assert.equal(exactInteger('-12.5e40'), -(10n ** 40n));
    assert.equal(exactInteger('-1e400'), -(10n ** 40n));
  });

  test('values just past int64 stay past int64', () => {
    for (const literal of ['9.3e18', '92233720368547758080e-1', '1e19', '18446744073709551616']) {
      const value = exactInteger(literal);
      assert.ok(value !== undefined && value > INT64_MAX, literal);
    }
  });

  test('text that is not a JSON number is undefined', () => {
    for (const literal of ['', 'abc', '1e', '.5', '5.', '+1', '1_000', '0x10', ' 1', '1 ', 'Infinity', 'NaN', '--1']) {
      assert.equal(exactInteger(literal), undefined, JSON.stringify(literal));
    }
  });

  test('zero with a large exponent is zero', () => {
    assert.equal(exactInteger('0e41'), 0n);
    assert.equal(exactInteger('0.0e400'), 0n);
  });
});

describe('nameProblem', () => {
  test('ordinary names, including astral characters in proper pairs, have no problem', () => {
    for (const name of ['Rex', 'Mía', '小狗', 'Dog 🐕', '\uD83D\uDE00', 'a b\tc', 'x'.repeat(100)]) {
      assert.equal(nameProblem(name), undefined, JSON.stringify(name));
    }
  });

  test('an unpaired surrogate is a problem', () => {
    for (const name of ['\uD800', '\uDFFF', 'ab\uD83D', '\uDE00ab', 'a\uD83Db', '\uDE00\uD83D']) {
      assert.match(nameProblem(name) ?? '', /surrogate/, JSON.stringify(name));
    }
  });

  test('a NUL character is a problem', () => {
    for (const name of ['\u0000', 'Rex\u0000', '\u0000Rex', 'R\u0000ex']) {
      assert.match(nameProblem(name) ?? '', /NUL/, JSON.stringify(name));
    }
  });
});

describe('isPositiveInt64', () => {
  test('accepts 1 through 9223372036854775807', () => {
    for (const v of [1n, 2n, 9007199254740993n, INT64_MAX - 1n, INT64_MAX]) assert.equal(isPositiveInt64(v), true, String(v));
    assert.equal(INT64_MAX, 2n ** 63n - 1n);
  });

  test('rejects zero, negatives and anything above int64', () => {
    for (const v of [0n, -1n, -(2n ** 63n), INT64_MAX + 1n, 2n ** 64n, 10n ** 40n]) assert.equal(isPositiveInt64(v), false, String(v));
  });
});

describe('exactTopLevelIntegers', () => {
  /** The same answer as JSON.parse's reviver with source text access gives, which the scan replaces. */
  function byReviver(text: string): Map<string, bigint | undefined> {
    const holders: object[] = [];
    const found: [string, string][] = [];
    const root: unknown = JSON.parse(text, function (this: object, key: string, value: unknown, context?: { source?: string }) {
      if (typeof value === 'number' && context?.source !== undefined) {
        holders.push(this);
        found.push([key, context.source]);
      }
      return value;
    });
    const exact = new Map<string, bigint | undefined>();
    // An array's elements are not fields: only an object's members count.
    if (Array.isArray(root)) return exact;
    found.forEach(([key, literal], i) => holders[i] === root && exact.set(key, exactInteger(literal)));
    return exact;
  }

  const bodies = [
    '{"name":"Rex","categoryId":9223372036854775807}',
    ' { "categoryId" : -12 , "name" : "a,b:{c}[d]\\"e", "x": 1.5e3, "y": 1.25 } ',
    '{"n\\u0061me":"x","c\\"id":7,"nested":{"categoryId":5,"deep":[1,2,{"z":3}]},"after":[4],"last":0}',
    '{"a":{"b":1},"c":2,"d":[{"e":3}],"f":"4","g":true,"h":null,"i":-0.0,"j":1E+2}',
    '{}',
    '[1,2,3]',
    '42',
    '"string"',
    '{"categoryId":1,"categoryId":2}',
  ];
  for (const body of bodies) {
    test(`finds what a reviver finds in ${body}`, () => {
      assert.deepEqual(exactTopLevelIntegers(body), byReviver(body));
    });
  }
});

describe('petJson', () => {
  test('writes the fields in their order, ids as exact integers and the name escaped as JSON.stringify does', () => {
    const pet = { id: INT64_MAX, name: 'a"b\\c\u0001\n\u2028🐈 \ud800', categoryId: 2n ** 53n + 1n, status: 'sold' } as const;
    assert.equal(
      petJson(pet),
      '{"id":9223372036854775807,"name":"a\\"b\\\\c\\u0001\\n\u2028🐈 \\ud800","categoryId":9007199254740993,"status":"sold"}',
    );
    assert.equal(petsJson([pet, { ...pet, id: 1n }]), `[${petJson(pet)},${petJson({ ...pet, id: 1n })}]`);
    assert.equal(petsJson([]), '[]');
  });

  test('any pet reads back as itself, ids exact', () => {
    // Any code point, lone surrogates too, and often one that JSON escapes or a reader may trip on.
    const char = fc.oneof(
      fc.constantFrom('"', '\\', '\u0000', '\u001f', '\u007f', '\u2028', '\u2029', '\ud800', '\udfff', '🐈'),
      fc.integer({ min: 0, max: 0x10ffff }).map((c) => String.fromCodePoint(c)),
    );
    const pet = fc.record({
      id: fc.bigInt({ min: 1n, max: INT64_MAX }),
      name: fc.string({ unit: char, minLength: 1, maxLength: 100 }),
      categoryId: fc.bigInt({ min: 1n, max: INT64_MAX }),
      status: fc.constantFrom(...PET_STATUSES),
    });
    fc.assert(
      fc.property(pet, (p) => {
        const read = JSON.parse(petJson(p), (_key, value, context?: { source?: string }) =>
          typeof value === 'number' ? BigInt(context!.source!) : value,
        );
        assert.deepEqual(read, { ...p });
      }),
    );
  });
});
