/**
 * What one key's answers say about its minute windows while Redis and the instances fail, set against
 * what docs/scale-out.md promises ("What happens during an outage"):
 * - in a window no outage touches, exactly the limit is admitted across the instances;
 * - in a window an outage touches, no instance admits more than the limit, and all together at most
 *   `limit + Σᵢ (limit − cᵢ)`, cᵢ being the count instance i last saw from Redis for the window, the
 *   sum over the instances other than the last to admit before the outage (at most N times the limit);
 * - Redis itself, which counts every request it admits and is told what was admitted in memory
 *   before it decides again, admits at most the limit in a window whose counters it kept (it was
 *   paused, not restarted empty).
 *
 * Windows are whole UTC minutes by the real clock, which is Redis's: Redis runs on this machine. A
 * request is put in a window only when it was both sent and answered within it; one that straddles a
 * boundary, or got no answer (an instance killed under it), may or may not have been counted, so it
 * loosens only the lower bound. An instance is each process: one restarted is a new instance that
 * starts knowing no counts. Whether Redis or the instance's memory decided is read from its log
 * (`Redis unreachable` ... `Redis reachable again`), taken a moment wide; what an instance saw from
 * Redis, from the answers it gave outside those spans. Answers the client never read only make a
 * bound looser, never a failure of the service.
 */
import { MINUTE_MS } from '../../src/domain/durations.ts';

/** A request of the key and its answer, by the real clock. */
export interface KeyAnswer {
  /** The instance process asked. */
  instance: string;
  sentAt: number;
  answeredAt: number;
  /** The HTTP status; undefined when no answer came. */
  status: number | undefined;
  /** X-RateLimit-Remaining and X-RateLimit-Reset (Unix seconds), when answered. */
  remaining?: number;
  resetS?: number;
}

/** One server process: when it ran, and when its log said it was limiting in memory or shared again. */
export interface InstanceLife {
  name: string;
  /** When it was spawned, when it was sent the signal that stopped it, and when it had exited. */
  startedAt: number;
  signalledAt: number | undefined;
  stoppedAt: number | undefined;
  /** Its limiter's lines (`Redis unreachable`: shared false; `Redis reachable again`: true), by when they were read. */
  limiterLines: readonly { at: number; shared: boolean }[];
}

/** Redis not answering: from just before it stopped to just after it answered again. */
export interface RedisOutage {
  label: string;
  from: number;
  backAt: number;
  /** Whether it came back without its counters (restarted empty), or kept them (paused). */
  emptied: boolean;
}

/** A log line is read a little after the decision it reports; a span starts this much earlier. */
const LOG_SLACK_MS = 2000;

interface DegradedSpan {
  from: number;
  /** When it said it was shared again; Infinity if it never did. */
  to: number;
  /** Whether what it admitted in memory can have reached Redis: it said so and lived on a moment. */
  landed: boolean;
}

/** When each instance limited in memory, from its log. */
function degradedSpans(life: InstanceLife): DegradedSpan[] {
  const spans: DegradedSpan[] = [];
  let open: number | undefined;
  for (const line of life.limiterLines) {
    if (!line.shared && open === undefined) open = line.at - LOG_SLACK_MS;
    if (line.shared && open !== undefined) {
      spans.push({ from: open, to: line.at, landed: (life.signalledAt ?? Infinity) >= line.at + LOG_SLACK_MS });
      open = undefined;
    }
  }
  if (open !== undefined) spans.push({ from: open, to: life.stoppedAt ?? Infinity, landed: false });
  return spans;
}

const overlaps = (a: { from: number; to: number }, b: { from: number; to: number }) => a.from <= b.to && b.from <= a.to;

export interface OutageEffect extends RedisOutage {
  /** Until every instance that limited in memory during the outage said it was shared again (or stopped), and a moment more. */
  until: number;
}

/** How long each outage's effect lasted. */
export function outageEffects(outages: readonly RedisOutage[], lives: readonly InstanceLife[]): OutageEffect[] {
  return outages.map((outage) => {
    let until = outage.backAt;
    for (const life of lives) {
      for (const span of degradedSpans(life)) {
        if (overlaps(span, { from: outage.from, to: outage.backAt })) until = Math.max(until, span.to);
      }
    }
    return { ...outage, until: until + LOG_SLACK_MS };
  });
}

export interface WindowReport {
  /** The window's start (epoch ms). */
  start: number;
  /** 2xx answers sent and read within the window, in all and per instance. */
  admitted: number;
  admittedBy: Record<string, number>;
  /** Those of them Redis decided: given while the instance's log did not say it limited in memory. */
  admittedByRedis: number;
  /** 429 answers within it. */
  refused: number;
  /** Requests that may have been counted in it unseen: straddling a boundary, or with no 2xx or 429 answer. */
  uncertain: number;
  /** The outages whose effect reaches into the part of it the key's requests span. */
  touchedBy: string[];
  /** Whether one of them lost Redis's counters. */
  countersLost: boolean;
  /** What may be admitted in it: the limit when untouched, else the documented bound. */
  bound: number;
  /** How the bound was made, for a failure's message. */
  boundTerms: string[];
}

/** A key's windows, each with its answers counted and its bound worked out. */
export function windowReports(
  answers: readonly KeyAnswer[],
  lives: readonly InstanceLife[],
  effects: readonly OutageEffect[],
  limit: number,
): WindowReport[] {
  const windowOf = (ms: number) => ms - (ms % MINUTE_MS);
  const spans = new Map(lives.map((life) => [life.name, degradedSpans(life)]));
  const starts = [...new Set(answers.flatMap((a) => [windowOf(a.sentAt), windowOf(a.answeredAt)]))].sort((x, y) => x - y);
  const byRedis = (a: KeyAnswer) => !spans.get(a.instance)!.some((span) => overlaps(span, { from: a.sentAt, to: a.answeredAt }));

  /** The count the instance last saw from Redis for the window before `before`: 0 when none is known. */
  const lastSeen = (instance: string, start: number, before: number): number => {
    const shared = answers.filter(
      (a) =>
        a.instance === instance &&
        a.sentAt >= start &&
        a.answeredAt < before &&
        a.remaining !== undefined &&
        a.resetS! * 1000 === start + MINUTE_MS &&
        byRedis(a),
    );
    const last = shared.reduce<KeyAnswer | undefined>((found, a) => (found && found.answeredAt >= a.answeredAt ? found : a), undefined);
    return last ? limit - last.remaining! : 0;
  };

  /**
   * What the outage may add above the limit in the window: Σ (limit − cᵢ) over the instances it found
   * running, but for the last to admit before it (the one that saw the highest count), when what that
   * one admitted in memory reached Redis before the next outage began; and when it lost Redis's counts
   * (docs/scale-out.md), the limit once more (Redis decides afresh until every running instance's part
   * is back) and what instances stopped by then had admitted in the window (nobody can give it back).
   */
  const extraOf = (effect: OutageEffect, start: number, terms: string[]): number => {
    const lostCounts = effect.emptied ? emptiedExtra(effect, start, terms) : 0;
    return lostCounts + inMemoryExtra(effect, start, terms);
  };

  const emptiedExtra = (effect: OutageEffect, start: number, terms: string[]): number => {
    const gone = new Set(lives.filter((life) => (life.stoppedAt ?? Infinity) < effect.until).map((life) => life.name));
    const lost = answers.filter(
      (a) => gone.has(a.instance) && windowOf(a.sentAt) === start && a.status !== undefined && a.status >= 200 && a.status < 300,
    ).length;
    terms.push(`${effect.label}: Redis lost its counts: +${limit}, and +${lost} admitted by instances stopped by then`);
    return limit + lost;
  };

  const inMemoryExtra = (effect: OutageEffect, start: number, terms: string[]): number => {
    const during = { from: effect.from, to: effect.until };
    const next = effects.filter((e) => e.from > effect.from).reduce((first, e) => Math.min(first, e.from), Infinity);
    const running = lives.filter((life) => life.startedAt <= during.to && (life.stoppedAt ?? Infinity) >= during.from);
    const seen = running.map((life) => {
      const count = lastSeen(life.name, start, effect.from);
      // What it admitted in memory is lost to Redis when it stopped before saying it was shared again.
      const mine = spans.get(life.name)!.filter((span) => overlaps(span, during));
      return { name: life.name, count, lost: mine.some((span) => !span.landed), late: mine.some((span) => span.to >= next) };
    });
    const last = seen.reduce<(typeof seen)[number] | undefined>(
      (best, s) => (!best || s.count > best.count || (s.count === best.count && best.lost && !s.lost) ? s : best),
      undefined,
    );
    let extra = 0;
    for (const s of seen) {
      if (s === last && !s.lost && !s.late) {
        terms.push(`${effect.label}: ${s.name} saw ${s.count}, the last to admit`);
        continue;
      }
      const term = Math.max(0, limit - s.count);
      extra += term;
      const why = s.lost
        ? ' (stopped before its counts reached Redis)'
        : s.late
          ? ' (its counts reached Redis after the next outage began)'
          : '';
      terms.push(`${effect.label}: ${s.name} saw ${s.count}${why}: +${term}`);
    }
    return extra;
  };

  return starts.map((start) => {
    const end = start + MINUTE_MS;
    const inside = answers.filter((a) => windowOf(a.sentAt) === start && windowOf(a.answeredAt) === start);
    const reaching = answers.filter((a) => a.sentAt < end && a.answeredAt >= start);
    const admittedAnswers = inside.filter((a) => a.status !== undefined && a.status >= 200 && a.status < 300);
    const admittedBy: Record<string, number> = {};
    for (const a of admittedAnswers) admittedBy[a.instance] = (admittedBy[a.instance] ?? 0) + 1;
    // An outage after the key's last request of the window changes nothing the window shows.
    const lastRequest = Math.max(...reaching.map((a) => a.answeredAt));
    const touching = effects.filter((e) => e.from < Math.min(end, lastRequest) && e.until >= start);
    const terms = [`limit ${limit}`];
    const bound = limit + touching.reduce((sum, effect) => sum + extraOf(effect, start, terms), 0);
    return {
      start,
      admitted: admittedAnswers.length,
      admittedBy,
      admittedByRedis: admittedAnswers.filter(byRedis).length,
      refused: inside.filter((a) => a.status === 429).length,
      uncertain: reaching.filter(
        (a) => !inside.includes(a) || a.status === undefined || !((a.status >= 200 && a.status < 300) || a.status === 429),
      ).length,
      touchedBy: touching.map((e) => e.label),
      countersLost: touching.some((e) => e.emptied),
      bound,
      boundTerms: terms,
    };
  });
}
