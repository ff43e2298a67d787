/**
 * The realistic mix's data: 1,000 clients, each with its own API key, for bench/mix.lua.
 *
 * Most keys are Enterprise keys with custom limits no run reaches; the rest are Free, Pro and Business
 * keys, whose plans allow 60, 300 and 1,000 requests a minute. Each run gets fresh keys of those plans,
 * and each such client sends at most two thirds of its plan's per-minute limit in the run (a run that
 * is extended sends it in parts), so no
 * window is ever exceeded however close together runs come (rate-limit windows are fixed and per key):
 * a 429 in the mix is a finding, not an expected answer.
 */
import { writeFileSync } from 'node:fs';
import { createKey } from '../src/cli/keys.ts';
import { CursorCodec } from '../src/domain/cursor.ts';
import type { PetStatus } from '../src/domain/pet.ts';
import { STANDARD_PLAN_LIMITS } from '../src/domain/plans.ts';
import type { Store } from '../src/storage/store.ts';
import { luaString } from './wrk.ts';

export const MIX_CLIENTS = 1_000;
export const MIX_PETS = 10_000;
/** Clients per run on each limited plan; the other clients hold Enterprise keys. */
const LIMITED_PER_PLAN = 50;
const LIMITED_PLANS = ['free', 'pro', 'business'] as const;
/** Shares of the requests: creates and lookups by id; the rest are list pages. */
const CREATE_SHARE = 0.1;
const GET_SHARE = 0.25;
/** Share of list requests where the client leaves its walk and starts a new one. */
const ABANDON_SHARE = 0.02;
/** Share of new walks asking for 50 pets a page instead of the default 20. */
const LARGE_PAGE_SHARE = 0.2;
/** Share of clients that resume a walk from a cursor saved earlier, at a random depth. */
const RESUMING_SHARE = 0.5;

/** Statuses of the mix's pets by id: half available, a fifth pending, the rest sold, interleaved. */
export const MIX_STATUS_PATTERN: readonly PetStatus[] = [
  'available',
  'sold',
  'available',
  'pending',
  'available',
  'sold',
  'available',
  'pending',
  'sold',
  'available',
];
const statusOf = (id: number) => MIX_STATUS_PATTERN[id % MIX_STATUS_PATTERN.length]!;

interface MixClient {
  key: string;
  /** Requests this client may send in one run; none for Enterprise. */
  budget?: number;
  /** A saved cursor's page to resume from. */
  bookmark?: string;
}

export interface MixKeys {
  enterprise: string[];
  /** Per run (the warm-up is run 0): the limited clients' fresh keys and budgets. */
  limitedByRun: { key: string; budget: number }[][];
}

/** `partsPerRun`: a run may be made of that many wrk runs, each sending each limited client's budget. */
export async function createMixKeys(store: Store, runs: number, partsPerRun: number): Promise<MixKeys> {
  const enterprise: string[] = [];
  const limitedCount = LIMITED_PER_PLAN * LIMITED_PLANS.length;
  for (let i = 0; i < MIX_CLIENTS - limitedCount; i++) {
    // Custom limits vary a little from key to key, as a customer's contract would.
    const rpm = 100_000 + 1_000 * (i % 7);
    const { key } = await createKey(store, 'production', { plan: 'enterprise', rpm: String(rpm), rpd: String(rpm * 1_000) });
    enterprise.push(key);
  }
  const limitedByRun: MixKeys['limitedByRun'] = [];
  for (let run = 0; run < runs; run++) {
    const keys = [];
    for (const plan of LIMITED_PLANS) {
      const { perMinute, perDay } = STANDARD_PLAN_LIMITS[plan];
      const budget = Math.floor((Math.min(perMinute, perDay) * 2) / 3 / partsPerRun);
      for (let i = 0; i < LIMITED_PER_PLAN; i++) keys.push({ key: (await createKey(store, 'production', { plan })).key, budget });
    }
    limitedByRun.push(keys);
  }
  return { enterprise, limitedByRun };
}

/**
 * Saved cursors, as a client that stopped paging would have kept them: each is the `next` cursor of
 * a page of a walk from the first page with the default limit, so resumed walks share pages with
 * the walks that started from the beginning (and the page cache sees the pages real clients ask for).
 */
function bookmarks(codec: CursorCodec, count: number, random: () => number): string[] {
  const walks: { status: PetStatus | undefined; ids: number[] }[] = [undefined, 'available', 'pending', 'sold'].map((status) => ({
    status: status as PetStatus | undefined,
    ids: Array.from({ length: MIX_PETS }, (_, i) => i + 1).filter((id) => status === undefined || statusOf(id) === status),
  }));
  return Array.from({ length: count }, () => {
    const walk = walks[Math.floor(random() * walks.length)]!;
    const pages = Math.floor(walk.ids.length / 20);
    const afterId = walk.ids[20 * (1 + Math.floor(random() * (pages - 1))) - 1]!;
    const query = new URLSearchParams({ limit: '20' });
    if (walk.status) query.set('status', walk.status);
    query.set('cursor', codec.encode({ afterId: BigInt(afterId), status: walk.status }));
    return `/v1/pets?${query}`;
  });
}

/** A small deterministic generator, so that every run of the benchmark gives the clients the same bookmarks. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Writes the Lua data file for one run of bench/mix.lua. */
export function writeMixData(file: string, keys: MixKeys, cursorSecret: string, run: number): void {
  const limited = keys.limitedByRun[run];
  if (!limited) throw new Error(`no mix keys were made for run ${run}`);
  const random = seeded(42);
  const saved = bookmarks(new CursorCodec(cursorSecret), MIX_CLIENTS, random);
  const clients: MixClient[] = [];
  for (let i = 0, e = 0, l = 0; i < MIX_CLIENTS; i++) {
    // Limited clients are spread evenly among the others, so that every stretch of turns has some.
    const limitedTurn = Math.floor(((i + 1) * limited.length) / MIX_CLIENTS) > l;
    const client: MixClient = limitedTurn ? { ...limited[l++]! } : { key: keys.enterprise[e++]! };
    if (random() < RESUMING_SHARE) client.bookmark = saved[i];
    clients.push(client);
  }
  const lua = (c: MixClient) =>
    `{ key = ${luaString(c.key)}${c.budget === undefined ? '' : `, budget = ${c.budget}`}${c.bookmark ? `, bookmark = ${luaString(c.bookmark)}` : ''} },`;
  writeFileSync(
    file,
    [
      'return {',
      `  maxId = ${MIX_PETS},`,
      `  createShare = ${CREATE_SHARE}, getShare = ${GET_SHARE}, abandonShare = ${ABANDON_SHARE}, largePageShare = ${LARGE_PAGE_SHARE},`,
      '  clients = {',
      ...clients.map((c) => '    ' + lua(c)),
      '  },',
      '}',
      '',
    ].join('\n'),
  );
}

/** What the mix's done() printed: answers by status, by kind, and the bookkeeping checks. */
export interface MixCounts {
  statuses: Map<number, number>;
  kinds: Map<string, number>;
  unmatched: number;
  walksEnded: number;
}

export function parseMixCounts(lines: string[]): MixCounts {
  const counts: MixCounts = { statuses: new Map(), kinds: new Map(), unmatched: 0, walksEnded: 0 };
  for (const line of lines) {
    const [tag, what, a, b] = line.trim().split(/\s+/);
    if (tag !== 'mix') continue;
    if (what === 'status') counts.statuses.set(Number(a), Number(b));
    else if (what === 'kind') counts.kinds.set(a!, Number(b));
    else if (what === 'unmatched') counts.unmatched = Number(a);
    else if (what === 'walks-ended') counts.walksEnded = Number(a);
  }
  return counts;
}

export function mergeMixCounts(parts: MixCounts[]): MixCounts {
  const merged: MixCounts = { statuses: new Map(), kinds: new Map(), unmatched: 0, walksEnded: 0 };
  for (const p of parts) {
    p.statuses.forEach((n, k) => merged.statuses.set(k, (merged.statuses.get(k) ?? 0) + n));
    p.kinds.forEach((n, k) => merged.kinds.set(k, (merged.kinds.get(k) ?? 0) + n));
    merged.unmatched += p.unmatched;
    merged.walksEnded += p.walksEnded;
  }
  return merged;
}
