/** `petstore keys ...`: the operator's API key management. */
import { issueKey, looksLikeKey, type ApiKey, type Environment, type IssuedKey } from '../domain/api-key.ts';
import { DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS } from '../domain/durations.ts';
import { KeyTags } from '../domain/key-tags.ts';
import { isPlan, STANDARD_PLAN_LIMITS, type PlanLimits } from '../domain/plans.ts';
import type { Store } from '../storage/store.ts';
import { StateError, UsageError } from './errors.ts';
import { firstUnsafe, printable } from './printable.ts';

export { StateError, UsageError } from './errors.ts';

export interface CreateKeyOptions {
  plan?: string | undefined;
  rpm?: string | undefined;
  rpd?: string | undefined;
  label?: string | undefined;
}

function positiveInt(name: string, raw: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(raw) || Number(raw) > 2_000_000_000) {
    throw new UsageError(`${name} must be a positive integer, got "${raw}"`);
  }
  return Number(raw);
}

/** The limits a plan and its flags give; a UsageError when they are missing, misplaced or senseless. */
export function limitsFor(options: CreateKeyOptions): PlanLimits {
  const plan = options.plan;
  if (plan === undefined) throw new UsageError('--plan is required: free, pro, business or enterprise');
  if (!isPlan(plan)) throw new UsageError(`--plan must be free, pro, business or enterprise, got "${plan}"`);
  if (plan !== 'enterprise') {
    if (options.rpm !== undefined || options.rpd !== undefined) {
      throw new UsageError('--rpm and --rpd apply only to --plan enterprise');
    }
    return STANDARD_PLAN_LIMITS[plan];
  }
  if (options.rpm === undefined || options.rpd === undefined) {
    throw new UsageError('--plan enterprise needs --rpm N and --rpd N');
  }
  const limits = { perMinute: positiveInt('--rpm', options.rpm), perDay: positiveInt('--rpd', options.rpd) };
  // A day holds every minute: below the per-minute limit, a daily one would leave that one meaningless.
  if (limits.perDay < limits.perMinute) {
    throw new UsageError(`--rpd (${limits.perDay}) must be at least --rpm (${limits.perMinute}): a day's requests include every minute's`);
  }
  return limits;
}

/**
 * Commands name a key by its ID (key_...), never by the key itself: one given the key is refused in words that
 * say where the ID is, and show no more of the secret than `keys list` does.
 */
export function checkKeyId(id: string): void {
  if (!looksLikeKey(id)) return;
  throw new UsageError(
    `${printable(id.slice(0, 15))}… is an API key, not a key's ID: commands take the ID (key_ and 16 hexadecimal digits). ` +
      `petstore keys list shows each key's ID beside its first characters.`,
  );
}

/** A label is printable text of at most 200 characters: a UsageError naming the first character that is not. */
export function checkLabel(label: string | undefined): void {
  if (label === undefined) return;
  if (label.length > 200) throw new UsageError('--label is limited to 200 characters');
  const unsafe = firstUnsafe(label);
  if (unsafe)
    throw new UsageError(
      `--label must be printable text, without control or format characters (line breaks, tabs, escape sequences, ` +
        `bidi overrides, zero-width spaces): ${unsafe.codePoint} at character ${unsafe.position}`,
    );
}

/** A new key, tagged with the secret of the database it is stored in: the one every server on that database checks tags with. */
async function issueFor(store: Store, environment: Environment): Promise<IssuedKey> {
  return issueKey(environment, new KeyTags(await store.cursorSecret()));
}

export async function createKey(
  store: Store,
  environment: Environment,
  options: CreateKeyOptions,
): Promise<{ key: string; record: ApiKey }> {
  const limits = limitsFor(options);
  checkLabel(options.label);
  const issued = await issueFor(store, environment);
  const record = await store.createKey({
    id: issued.id,
    hash: issued.hash,
    prefix: issued.prefix,
    environment,
    plan: options.plan as ApiKey['plan'],
    perMinute: limits.perMinute,
    perDay: limits.perDay,
    label: options.label ?? null,
    subjectId: null,
    tagged: true,
  });
  return { key: issued.key, record };
}

const DURATION_UNITS_MS: Record<string, number> = { s: SECOND_MS, m: MINUTE_MS, h: HOUR_MS, d: DAY_MS };

/** `90s`, `30m`, `24h`, `7d`: a grace period, from 1 second to 365 days; zero and negative ones are refused. */
export function parseDuration(name: string, raw: string): number {
  const match = /^([1-9][0-9]{0,5})([smhd])$/.exec(raw);
  const ms = match ? Number(match[1]) * DURATION_UNITS_MS[match[2]!]! : NaN;
  if (!(ms >= SECOND_MS && ms <= 365 * DAY_MS))
    throw new UsageError(`${name} must be a duration like 90s, 30m, 24h or 7d, from 1s to 365d, got "${raw}"`);
  return ms;
}

async function existingKey(store: Store, id: string): Promise<ApiKey> {
  const key = (await store.listKeys()).find((k) => k.id === id);
  if (!key) throw new StateError(`no key with ID ${id} (petstore keys list shows them)`);
  if (key.revokedAt) throw new StateError(`key ${id} was revoked at ${key.revokedAt.toISOString()}`);
  return key;
}

/**
 * A new key with the old one's environment, plan, limits, label and subject (so it goes on from its counts
 * and shares its ban: docs/rate-limits.md); the old one works for the grace period. `bannedUntilMs`: that ban's end.
 */
export async function rotateKey(store: Store, id: string, graceRaw: string | undefined, nowMs: number) {
  const graceMs = parseDuration('--grace', graceRaw ?? '24h');
  const old = await existingKey(store, id);
  // Rotating an expired key would hand out a fresh key that never expires for one the operator retired.
  if (old.expiresAt && old.expiresAt.getTime() <= nowMs) {
    throw new StateError(`key ${id} expired at ${old.expiresAt.toISOString()}; create a new key instead (petstore keys create)`);
  }
  const issued = await issueFor(store, old.environment);
  const record = await store.createKey({
    id: issued.id,
    hash: issued.hash,
    prefix: issued.prefix,
    environment: old.environment,
    plan: old.plan,
    perMinute: old.perMinute,
    perDay: old.perDay,
    label: old.label,
    subjectId: old.subjectId,
    tagged: true,
  });
  const oldExpiry = nowMs + graceMs;
  // A key already set to expire sooner keeps its earlier date.
  const expiresAtMs = old.expiresAt && old.expiresAt.getTime() < oldExpiry ? old.expiresAt.getTime() : oldExpiry;
  const retired = (await store.updateKey(old.id, { expiresAtMs }))!;
  const bannedUntilMs = await store.banEndOf(record.subjectId, nowMs);
  return { key: issued.key, record, retired, bannedUntilMs };
}

/**
 * Lifts the ban of the key's subject, which every key of its rotations shares: unbanning the old or
 * the new key of a rotation lifts it for both. Returns the other keys that share it.
 */
export async function unbanKey(store: Store, id: string, nowMs: number): Promise<ApiKey[]> {
  const keys = await store.listKeys();
  const key = keys.find((k) => k.id === id);
  if (!key) throw new StateError(`no key with ID ${id} (petstore keys list shows them)`);
  if (!(await store.liftBan(key.subjectId, nowMs))) throw new StateError(`key ${id} is not banned`);
  return keys.filter((k) => k.subjectId === key.subjectId && k.id !== id);
}

/**
 * Every key with the end of its subject's ban, as `keys list` shows them. An end further than banDurationMs
 * (BAN_DURATION_SECONDS) from nowMs is marked: servers do not believe it (docs/rate-limits.md, "A clock that jumps").
 */
export async function listKeys(store: Store, nowMs: number, banDurationMs = Infinity) {
  const bans = new Map((await store.listBans(nowMs)).map((b) => [b.keyId, b.bannedUntil.getTime()]));
  return (await store.listKeys()).map((key) => {
    const banEndMs = bans.get(key.subjectId);
    return describeKey(key, banEndMs, banEndMs !== undefined && banEndMs - nowMs > banDurationMs);
  });
}

export async function changePlan(store: Store, id: string, options: CreateKeyOptions): Promise<ApiKey> {
  const limits = limitsFor(options);
  await existingKey(store, id);
  return (await store.updateKey(id, { plan: options.plan as ApiKey['plan'], perMinute: limits.perMinute, perDay: limits.perDay }))!;
}

/** When given, an expiry before `nowMs` is refused unless `force`: it would cut the key off at once. */
export interface ExpiryCheck {
  nowMs: number;
  force: boolean;
}

export async function setExpiry(store: Store, id: string, at: string | undefined, never: boolean, check?: ExpiryCheck): Promise<ApiKey> {
  if ((at === undefined) === !never) throw new UsageError('keys expire needs exactly one of --at TIMESTAMP and --never');
  let expiresAtMs: number | null = null;
  if (at !== undefined) {
    expiresAtMs = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/.test(at) ? Date.parse(at) : NaN;
    if (Number.isNaN(expiresAtMs))
      throw new UsageError(`--at must be an ISO 8601 timestamp with a time zone, like 2027-01-31T00:00:00Z, got "${at}"`);
    if (check && !check.force && expiresAtMs <= check.nowMs) {
      throw new UsageError(`--at ${at} is in the past: the key would stop working at once; add --force to mean that, or keys revoke`);
    }
  }
  await existingKey(store, id);
  return (await store.updateKey(id, { expiresAtMs }))!;
}

/** `banEndTooFar`: the ban's stored end is more than one ban length away, so servers end it sooner (listKeys). */
export function describeKey(key: ApiKey, banEndMs: number | undefined, banEndTooFar = false) {
  return {
    id: key.id,
    prefix: key.prefix,
    environment: key.environment,
    plan: key.plan,
    rpm: key.perMinute,
    rpd: key.perDay,
    label: key.label,
    createdAt: key.createdAt.toISOString(),
    revokedAt: key.revokedAt?.toISOString() ?? null,
    expiresAt: key.expiresAt?.toISOString() ?? null,
    bannedUntil: banEndMs === undefined ? null : new Date(banEndMs).toISOString(),
    banEndTooFar,
    /** The id its limits and bans are kept under: its own, or the first key of the rotations it came from. */
    subjectId: key.subjectId,
  };
}

/** The widest `keys list` prints by default, so that it fits a terminal of 100 columns; `--wide` has no bound. */
export const TABLE_WIDTH = 100;

type ListedKey = ReturnType<typeof describeKey>;

/** The full state, with its timestamps: what `--wide` shows. */
function stateOf(r: ListedKey, nowMs: number): string {
  if (r.revokedAt) return `revoked ${r.revokedAt}`;
  if (r.expiresAt && Date.parse(r.expiresAt) <= nowMs) return `expired ${r.expiresAt}`;
  if (r.bannedUntil && r.banEndTooFar)
    return `ban stored until ${r.bannedUntil}, too far: each server ends it within one ban length of first reading it`;
  if (r.bannedUntil) return `banned until ${r.bannedUntil}`;
  return 'active';
}

/** The state in a word or two; a key that is still active but dated (a rotated one) shows the day it ends. */
function shortStateOf(r: ListedKey, nowMs: number): string {
  if (r.revokedAt) return 'revoked';
  if (r.expiresAt && Date.parse(r.expiresAt) <= nowMs) return 'expired';
  if (r.bannedUntil) return r.banEndTooFar ? 'ban end too far' : 'banned';
  return r.expiresAt ? `until ${r.expiresAt.slice(0, 10)}` : 'active';
}

/** 300, 10k, 2M; a long number that is not round is shown rounded and marked ≈ (`--wide` shows it exactly). */
function count(n: number): string {
  if (n >= 1_000_000 && n % 1_000_000 === 0) return `${n / 1_000_000}M`;
  if (n >= 10_000 && n % 1000 === 0) return `${n / 1000}k`;
  if (n >= 1_000_000) return `≈${Math.round(n / 1_000_000)}M`;
  if (n >= 100_000) return `≈${Math.round(n / 1000)}k`;
  return String(n);
}

/** Every cell escaped (a row written straight into the database may hold anything), then aligned. */
function layout(header: string[], lines: string[][]): string {
  const cells = lines.map((l) => l.map(printable));
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((l) => l[i]!.length)));
  return [header, ...cells]
    .map((l) =>
      l
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** An escape that printable() writes, or any one character: what a label is cut between. */
const LABEL_UNITS = /\\u\{[0-9a-f]+\}|\\u[0-9a-f]{4}|\\[nrt]|[\s\S]/gu;

const columns = (text: string) => [...text].length;

/** An escaped label cut to `room` columns with `…`, never inside an escape such as \u202e. */
function cut(label: string, room: number): string {
  if (columns(label) <= room) return label;
  let kept = '';
  for (const unit of label.match(LABEL_UNITS) ?? []) {
    if (columns(kept) + columns(unit) > room - 1) break;
    kept += unit;
  }
  return kept + '…';
}

/**
 * `keys list` as a table fitting TABLE_WIDTH columns, the label cut to fit (`wide`: every column in full).
 * Every column is escaped (printable.ts), so no label can clear the screen or forge a row.
 */
export function formatKeyTable(rows: ListedKey[], nowMs: number, options: { wide?: boolean } = {}): string {
  if (rows.length === 0) return 'No API keys. Create one with: petstore keys create --plan free';
  if (options.wide) {
    const header = ['ID', 'PREFIX', 'ENV', 'PLAN', 'RPM', 'RPD', 'STATE', 'CREATED', 'EXPIRES', 'LABEL'];
    const lines = rows.map((r) => [
      r.id,
      r.prefix + '…',
      r.environment,
      r.plan,
      String(r.rpm),
      String(r.rpd),
      stateOf(r, nowMs),
      r.createdAt,
      r.expiresAt ?? 'never',
      r.label ?? '',
    ]);
    return layout(header, lines);
  }
  const header = ['ID', 'PREFIX', 'PLAN', 'LIMITS', 'STATE', 'LABEL'];
  const lines = rows.map((r) =>
    [r.id, r.prefix + '…', r.plan, `${count(r.rpm)}/min ${count(r.rpd)}/day`, shortStateOf(r, nowMs)].map(printable),
  );
  // The label takes what the other columns leave; a longer one is cut.
  const used = header.slice(0, -1).reduce((sum, h, i) => sum + Math.max(h.length, ...lines.map((l) => l[i]!.length)) + 2, 0);
  const room = Math.max(TABLE_WIDTH - used, 'LABEL'.length);
  return layout(
    header,
    rows.map((r, i) => [...lines[i]!, cut(printable(r.label ?? ''), room)]),
  );
}
