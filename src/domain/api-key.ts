/**
 * API keys: a prefix naming the environment, then 256 random bits. Only the SHA-256 is stored: with that much
 * entropy a slow password hash protects nothing, and a lookup by indexed hash compares no secret in our code.
 */
import { hash, randomBytes } from 'node:crypto';
import type { Plan } from './plans.ts';

export const ENVIRONMENTS = ['production', 'staging'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

const KEY_PREFIX: Record<Environment, string> = {
  production: 'pet_live_',
  staging: 'pet_test_',
};

export interface ApiKey {
  /** Public identifier used by the operator (`keys revoke ID`) and in logs; never secret. */
  id: string;
  /** The first characters of the key, shown by `keys list` so an operator can recognise it. */
  prefix: string;
  environment: Environment;
  plan: Plan;
  perMinute: number;
  perDay: number;
  label: string | null;
  createdAt: Date;
  revokedAt: Date | null;
  /** When set, the key stops working at this moment (rotation grace periods, dated keys). */
  expiresAt: Date | null;
  /**
   * The id under which the key's rate limits and bans are kept: its own id, or for a key made by
   * rotation the subjectId of the key it replaces, so rotating resets neither quota nor ban.
   */
  subjectId: string;
}

export interface IssuedKey {
  /** The full secret, shown once. */
  key: string;
  hash: string;
  prefix: string;
  id: string;
}

export function issueKey(environment: Environment): IssuedKey {
  const key = KEY_PREFIX[environment] + randomBytes(32).toString('base64url');
  return {
    key,
    hash: hashKey(key),
    prefix: key.slice(0, KEY_PREFIX[environment].length + 6),
    id: 'key_' + randomBytes(8).toString('hex'),
  };
}

export function hashKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/** Characters of an issued key's secret part: 32 bytes in base64url, unpadded. */
const SECRET_LENGTH = 43;

/** Whether a key that claims this environment has the length every issued key has: one that has not was never issued. */
export function hasIssuedLength(key: string, environment: Environment): boolean {
  return key.length === KEY_PREFIX[environment].length + SECRET_LENGTH;
}

/** The environment a key claims by its prefix, or undefined when it has no known prefix. */
export function environmentOfKey(key: string): Environment | undefined {
  return ENVIRONMENTS.find((env) => key.startsWith(KEY_PREFIX[env]));
}
