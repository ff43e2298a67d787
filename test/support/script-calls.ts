/**
 * Which of the shared limiter's scripts Redis runs, for which subject and instance, seen through
 * MONITOR on a Redis of the test's own: what an outage's end costs is a number a test can assert.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { DECIDE, HAND_BACK, MARK, RAISE } from '../../src/limits/redis-scripts.ts';

const SCRIPTS = { decide: DECIDE, handBack: HAND_BACK, mark: MARK, raise: RAISE } as const;
export type ScriptName = keyof typeof SCRIPTS;

interface ScriptCall {
  script: ScriptName;
  subject: string;
  instance: string;
}

export interface ScriptCalls {
  /** How many calls of the script Redis ran, for the subject and the instance when given. */
  count(script: ScriptName, filter?: { subject?: string; instance?: string }): number;
  stop(): void;
}

const bySha = new Map<string, ScriptName>(
  Object.entries(SCRIPTS).map(([name, lua]) => [createHash('sha1').update(lua).digest('hex'), name as ScriptName]),
);
const byText = new Map<string, ScriptName>(Object.entries(SCRIPTS).map(([name, lua]) => [lua, name as ScriptName]));

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };
/** MONITOR quotes each argument as redis-cli does (\n, \", \xHH): the script's text as it was sent. */
const unescape = (quoted: string) =>
  quoted.replace(/\\(x[0-9a-f]{2}|.)/g, (_, e: string) =>
    e.length === 3 ? String.fromCharCode(parseInt(e.slice(1), 16)) : (ESCAPES[e] ?? e),
  );

/** Starts watching the Redis on `port`; resolves once MONITOR sees every command that follows. */
export async function watchScripts(port: number): Promise<ScriptCalls> {
  // monitor() opens a connection of its own, flagged O in CLIENT LIST.
  const client = new Redis(port, '127.0.0.1', { lazyConnect: true });
  client.on('error', () => undefined); // a Redis restarted by the test: the watch ends there
  await client.connect();
  const monitor = await client.monitor();
  monitor.on('error', () => undefined);
  const calls: ScriptCall[] = [];
  monitor.on('monitor', (_time: string, args: string[]) => {
    // EVALSHA sha (or EVAL script), the number of keys, the keys, then the test's clock and the instance's id.
    const [name, body, numKeys, firstKey] = args;
    const command = name?.toLowerCase();
    const script = command === 'evalsha' ? bySha.get(body!) : command === 'eval' ? byText.get(unescape(body!)) : undefined;
    if (!script) return;
    // Every key of a call names the subject in its hash tag.
    const subject = /\{(.*)\}/.exec(firstKey ?? '')?.[1] ?? '';
    calls.push({ script, subject, instance: args[3 + Number(numKeys) + 1] ?? '' });
  });
  return {
    count: (script, filter = {}) =>
      calls.filter(
        (c) =>
          c.script === script &&
          (filter.subject === undefined || c.subject === filter.subject) &&
          (filter.instance === undefined || c.instance === filter.instance),
      ).length,
    stop: () => {
      monitor.disconnect();
      client.disconnect();
    },
  };
}
