/** `petstore keys ...`: the operator's API key management. */
import { issueKey, type ApiKey, type Environment } from '../domain/api-key.ts';
import { DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS } from '../domain/durations.ts';
import { isPlan, STANDARD_PLAN_LIMITS, type PlanLimits } from '../domain/plans.ts';
import type { Store } from '../storage/store.ts';

export class UsageError extends Error {}

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

function limitsFor(options: CreateKeyOptions): PlanLimits {
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
  return limits;
}

export async function createKey(
  store: Store,
  environment: Environment,
  options: CreateKeyOptions,
): Promise<{ key: string; record: ApiKey }> {
  const limits = limitsFor(options);
  if (options.label !== undefined && options.label.length > 200) throw new UsageError('--label is limited to 200 characters');
  const issued = issueKey(environment);
  const record = await store.createKey({
    id: issued.id,
    hash: issued.hash,
    prefix: issued.prefix,
    environment,
    plan: options.plan as ApiKey['plan'],
    perMinute: limits.perMinute,
    perDay: limits.perDay,
    label: options.label ?? null,
  });
  return { key: issued.key, record };
}

const DURATION_UNITS_MS: Record<string, number> = { s: SECOND_MS, m: MINUTE_MS, h: HOUR_MS, d: DAY_MS };

/** `90s`, `30m`, `24h`, `7d`: a grace period, from 1 second to 365 days. */
export function parseDuration(name: string, raw: string): number {
  const match = /^([1-9][0-9]{0,5})([smhd])$/.exec(raw);
  const ms = match ? Number(match[1]) * DURATION_UNITS_MS[match[2]!]! : NaN;
  if (!(ms >= SECOND_MS && ms <= 365 * DAY_MS))
    throw new UsageError(`${name} must be a duration like 90s, 30m, 24h or 7d (at most 365d), got "${raw}"`);
  return ms;
}

async function existingKey(store: Store, id: string): Promise<ApiKey> {
  const key = (await store.listKeys()).find((k) => k.id === id);
  if (!key) throw new UsageError(`no key with ID ${id}`);
  if (key.revokedAt) throw new UsageError(`key ${id} is revoked`);
  return key;
}

/**
 * A new key with the same environment, plan, limits and label; the old one keeps working for the
 * grace period (default 24 hours) so clients can switch without an outage, then expires.
 */
export async function rotateKey(store: Store, id: string, graceRaw: string | undefined, nowMs: number) {
  const old = await existingKey(store, id);
  // Rotating an expired key would hand out a fresh key that never expires for one the operator retired.
  if (old.expiresAt && old.expiresAt.getTime() <= nowMs) {
    throw new UsageError(`key ${id} expired at ${old.expiresAt.toISOString()}; create a new key instead (petstore keys create)`);
  }
  const graceMs = parseDuration('--grace', graceRaw ?? '24h');
  const issued = issueKey(old.environment);
  const record = await store.createKey({
    id: issued.id,
    hash: issued.hash,
    prefix: issued.prefix,
    environment: old.environment,
    plan: old.plan,
    perMinute: old.perMinute,
    perDay: old.perDay,
    label: old.label,
  });
  const oldExpiry = nowMs + graceMs;
  // A key already set to expire sooner keeps its earlier date.
  const expiresAtMs = old.expiresAt && old.expiresAt.getTime() < oldExpiry ? old.expiresAt.getTime() : oldExpiry;
  const retired = (await store.updateKey(old.id, { expiresAtMs }))!;
  return { key: issued.key, record, retired };
}

export async function changePlan(store: Store, id: string, options: CreateKeyOptions): Promise<ApiKey> {
  await existingKey(store, id);
  const limits = limitsFor(options);
  return (await store.updateKey(id, { plan: options.plan as ApiKey['plan'], perMinute: limits.perMinute, perDay: limits.perDay }))!;
}

export async function setExpiry(store: Store, id: string, at: string | undefined, never: boolean): Promise<ApiKey> {
  if ((at === undefined) === !never) throw new UsageError('keys expire needs exactly one of --at TIMESTAMP and --never');
  let expiresAtMs: number | null = null;
  if (at !== undefined) {
    expiresAtMs = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/.test(at) ? Date.parse(at) : NaN;
    if (Number.isNaN(expiresAtMs))
      throw new UsageError(`--at must be an ISO 8601 timestamp with a time zone, like 2027-01-31T00:00:00Z, got "${at}"`);
  }
  await existingKey(store, id);
  return (await store.updateKey(id, { expiresAtMs }))!;
}

export function describeKey(key: ApiKey, banEndMs: number | undefined) {
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
  };
}

export function formatKeyTable(rows: ReturnType<typeof describeKey>[], nowMs: number): string {
  if (rows.length === 0) return 'No API keys. Create one with: petstore keys create --plan free';
  const header = ['ID', 'PREFIX', 'ENV', 'PLAN', 'RPM', 'RPD', 'STATE', 'CREATED', 'EXPIRES', 'LABEL'];
  const lines = rows.map((r) => [
    r.id,
    r.prefix + '…',
    r.environment,
    r.plan,
    String(r.rpm),
    String(r.rpd),
    r.revokedAt
      ? `revoked ${r.revokedAt}`
      : r.expiresAt && Date.parse(r.expiresAt) <= nowMs
        ? `expired ${r.expiresAt}`
        : r.bannedUntil
          ? `banned until ${r.bannedUntil}`
          : 'active',
    r.createdAt,
    r.expiresAt ?? 'never',
    r.label ?? '',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  return [header, ...lines]
    .map((l) =>
      l
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
