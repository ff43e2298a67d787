/**
 * The limiter's rules one by one, with the clock in the test's hand: the window a decision is reported
 * by, and the blocks of quota busy keys take from Redis (the in-process limiter: memory-limiter.test.ts;
 * temporary bans: bans.test.ts). What the HTTP suites reach only in part: what a retired block gives.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DAY_MS, MINUTE_MS } from '../../src/domain/durations.ts';
import { nearestExhaustion } from '../../src/limits/limiter.ts';
import { QuotaBlocks, type BlockWindows } from '../../src/limits/quota-blocks.ts';

/** 12:00:00 UTC on a day: a minute and a day start here. */
const NOON = Date.UTC(2026, 10, 22, 12, 0, 0);
describe('the window a decision is reported by', () => {
  const state = (name: string, windowMs: number, remaining: number) => ({ name, limit: 10, windowMs, remaining, resetAtMs: 0 });
  test('the lowest remaining; a tie goes to the longer window, in whatever order the windows come', () => {
    assert.equal(nearestExhaustion([state('minute', MINUTE_MS, 3), state('day', DAY_MS, 2)]).name, 'day');
    assert.equal(nearestExhaustion([state('day', DAY_MS, 3), state('minute', MINUTE_MS, 2)]).name, 'minute');
    assert.equal(nearestExhaustion([state('minute', MINUTE_MS, 2), state('day', DAY_MS, 2)]).name, 'day');
    assert.equal(nearestExhaustion([state('day', DAY_MS, 2), state('minute', MINUTE_MS, 2)]).name, 'day');
  });
});

describe('blocks of quota', () => {
  const STARTS = [NOON, Date.UTC(2026, 10, 22)];
  const windowsOf = (countsAfter: number[]): BlockWindows => ({
    names: ['minute', 'day'],
    starts: STARTS,
    limits: [2_000_000, 100_000_000],
    countsAfter,
  });
  function blocks(maxSize = 100) {
    const handed: [string[], number][] = [];
    const quota = new QuotaBlocks({ maxSize, lifetimeMs: 1000, onUnspent: (subject, w, n) => handed.push([[subject, ...w.names], n]) });
    return { quota, handed };
  }

  test('no block for limits below a thousand times the largest; a thousandth of the smallest otherwise', () => {
    const { quota } = blocks();
    assert.equal(quota.capFor([1_000, 100_000]), 1);
    assert.equal(quota.capFor([5_000, 1_000_000]), 5);
    assert.equal(quota.capFor([2_000_000, 100_000_000]), 100);
    assert.equal(blocks(1).quota.capFor([2_000_000, 100_000_000]), 1);
  });

  test('a block is spent one request at a time, each knowing what is left, and the next doubles when it is used up in time', () => {
    const { quota, handed } = blocks();
    assert.equal(quota.sizeFor('k', 100), 1, 'a first request is decided alone');
    assert.deepEqual(quota.granted('k', 4, windowsOf([10, 20]), NOON), [2_000_000 - 7, 100_000_000 - 17]);
    assert.deepEqual(quota.spend('k', STARTS, NOON + 1), [2_000_000 - 8, 100_000_000 - 18]);
    assert.ok(quota.spend('k', STARTS, NOON + 2));
    assert.ok(quota.spend('k', STARTS, NOON + 3));
    assert.equal(quota.spend('k', STARTS, NOON + 4), undefined, 'spent');
    assert.equal(quota.sizeFor('k', 100), 8);
    assert.equal(quota.sizeFor('k', 5), 5, 'never above the cap');
    assert.deepEqual(handed, []);
  });

  test('an expired or replaced block hands back what it left, and the next one is sized to what it served', () => {
    const { quota, handed } = blocks();
    quota.granted('k', 10, windowsOf([10, 10]), NOON);
    quota.spend('k', STARTS, NOON + 1);
    assert.equal(quota.spend('k', STARTS, NOON + 1000), undefined, 'expired at its lifetime');
    assert.deepEqual(handed, [[['k', 'minute', 'day'], 8]]);
    assert.equal(quota.sizeFor('k', 100), 2);
    quota.granted('k', 4, windowsOf([20, 20]), NOON + 1000);
    quota.granted('k', 4, windowsOf([24, 24]), NOON + 1001);
    assert.deepEqual(handed[1], [['k', 'minute', 'day'], 3]);
  });

  test('a block retired at a window boundary hands its rest back (each counter decides if it is still in that window)', () => {
    const { quota, handed } = blocks();
    quota.granted('k', 10, windowsOf([10, 10]), NOON + MINUTE_MS - 10);
    assert.equal(quota.spend('k', [NOON + MINUTE_MS, STARTS[1]!], NOON + MINUTE_MS), undefined);
    assert.deepEqual(handed, [[['k', 'minute', 'day'], 9]]);
  });

  test('sweep hands back expired blocks and forgets idle subjects; releaseAll hands back the rest and forgets all', () => {
    const { quota, handed } = blocks();
    quota.granted('idle', 5, windowsOf([5, 5]), NOON);
    quota.granted('busy', 7, windowsOf([7, 7]), NOON + 1500);
    quota.sweep(NOON + 1000);
    assert.deepEqual(handed, [[['idle', 'minute', 'day'], 4]], 'only the expired block');
    // A subject whose blocks grew, then went idle for two lifetimes, is forgotten: it starts at 1 again.
    quota.granted('grown', 2, windowsOf([2, 2]), NOON + 1000);
    quota.spend('grown', STARTS, NOON + 1001);
    assert.equal(quota.spend('grown', STARTS, NOON + 1002), undefined);
    assert.equal(quota.sizeFor('grown', 100), 4);
    quota.sweep(NOON + 1002 + 1999);
    assert.equal(quota.sizeFor('grown', 100), 4, 'not yet two lifetimes idle');
    quota.sweep(NOON + 1002 + 2000);
    assert.equal(quota.sizeFor('grown', 100), 1);
    assert.equal(handed.length, 2, 'the busy block expired and was handed back; the spent one gave nothing');
    assert.deepEqual(handed[1], [['busy', 'minute', 'day'], 6]);
    quota.granted('kept', 2, windowsOf([2, 2]), NOON + 5000);
    quota.spend('kept', STARTS, NOON + 5001);
    quota.spend('kept', STARTS, NOON + 5002);
    quota.granted('open', 3, windowsOf([3, 3]), NOON + 5000);
    // A block whose every request was spent, not yet replaced when it expires, has nothing to give.
    quota.granted('used', 2, windowsOf([2, 2]), NOON + 3000);
    quota.spend('used', STARTS, NOON + 3001);
    quota.sweep(NOON + 4000);
    assert.equal(handed.length, 2);
    quota.releaseAll();
    assert.deepEqual(handed[2], [['open', 'minute', 'day'], 2], 'the open block, and nothing of the spent one');
    assert.equal(handed.length, 3);
    assert.equal(quota.sizeFor('kept', 100), 1, 'forgotten');
    assert.equal(quota.spend('open', STARTS, NOON + 5003), undefined);
  });
});
