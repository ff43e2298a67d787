/** Rate-limit plans. Enterprise limits are set per key when it is created. */

export const PLANS = ['free', 'pro', 'business', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

export interface PlanLimits {
  perMinute: number;
  perDay: number;
}

export const STANDARD_PLAN_LIMITS: Record<Exclude<Plan, 'enterprise'>, PlanLimits> = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 },
};

export function isPlan(value: string): value is Plan {
  return (PLANS as readonly string[]).includes(value);
}
