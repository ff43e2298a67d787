/**
 * API keys: a prefix naming the environment, then 256 random bits, then a tag (key-tags.ts) that lets a
 * made-up key be refused without a lookup; keys issued before tags have none and keep working. Only the
 * SHA-256 is stored: with that much entropy a slow password hash protects nothing, and a lookup by indexed
 * hash compares no secret in our code.
 */
import { hash, randomBytes } from 'node:crypto';
import { TAG_LENGTH, type KeyTags } from './key-tags.ts';
import type { Plan } from './plans.ts';

export const ENVIRONMENTS = ['production', 'staging'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

const KEY_PREFIX: Record<Environment, string> = {
  production: 'pet_live_',
  staging: 'pet_test_',
};

/** Whether text is an API key itself (by its prefix), where a key's ID was meant. */
export function looksLikeKey(text: string): boolean {
  return Object.values(KEY_PREFIX).some((prefix) => text.startsWith(prefix));
}

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

/** A new key of the environment, tagged with the database's tags (every key issued since tags is). */
export function issueKey(environment: Environment, tags: KeyTags): IssuedKey {
  const body = KEY_PREFIX[environment] + randomBytes(32).toString('base64url');
  const key = body + tags.tagOf(body);
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

/** Characters of an issued key's random part: 32 bytes in base64url, unpadded. */
const SECRET_LENGTH = 43;

/**
 * The format of a key that claims this environment, told by its length: `tagged` (issued since tags: the
 * random part, then its tag), `untagged` (issued before them), or undefined for a length no key is issued with.
 */
export function formatOfKey(key: string, environment: Environment): 'tagged' | 'untagged' | undefined {
  const untagged = KEY_PREFIX[environment].length + SECRET_LENGTH;
  if (key.length === untagged + TAG_LENGTH) return 'tagged';
  return key.length === untagged ? 'untagged' : undefined;
}

/** The environment a key claims by its prefix, or undefined when it has no known prefix. */
export function environmentOfKey(key: string): Environment | undefined {
  return ENVIRONMENTS.find((env) => key.startsWith(KEY_PREFIX[env]));
}
