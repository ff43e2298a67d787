/** `petstore keys ...`: the operator's API key management. */
import { issueKey, type ApiKey, type Environment } from '../domain/api-key.js';
import { isPlan, STANDARD_PLAN_LIMITS, type PlanLimits } from '../domain/plans.js';
import type { Store } from '../storage/store.js';

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
    bannedUntil: banEndMs === undefined ? null : new Date(banEndMs).toISOString(),
  };
}

export function formatKeyTable(rows: ReturnType<typeof describeKey>[]): string {
  if (rows.length === 0) return 'No API keys. Create one with: petstore keys create --plan free';
  const header = ['ID', 'PREFIX', 'ENV', 'PLAN', 'RPM', 'RPD', 'STATE', 'CREATED', 'LABEL'];
  const lines = rows.map((r) => [
    r.id,
    r.prefix + '…',
    r.environment,
    r.plan,
    String(r.rpm),
    String(r.rpd),
    r.revokedAt ? `revoked ${r.revokedAt}` : r.bannedUntil ? `banned until ${r.bannedUntil}` : 'active',
    r.createdAt,
    r.label ?? '',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  return [header, ...lines].map((l) => l.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}
