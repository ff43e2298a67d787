/**
 * Variables that look like one of the service's but are not, which it would otherwise ignore without a word
 * (`SHUTDOWN_TIMEOUT=20000` for SHUTDOWN_TIMEOUT_MS, `PETSTORE_METRICS_PORT` for METRICS_PORT): named in a
 * warning at start with the name most likely meant (docs/configuration.md, "Names it does not know").
 * A name is suspect when it is within a small edit distance of a known one, is one with another unit
 * suffix or none, or carries the service's own prefix without being known. Names of other software the
 * service runs beside are never suspect: OpenTelemetry's (`OTEL_*`), PostgreSQL's (`PG*`), Node.js's and
 * npm's, the service links Kubernetes adds for every Service (`NAME_SERVICE_HOST`, `NAME_PORT_80_TCP`), and
 * the clients' and the test tools' own (`PETSTORE_URL`, `PETSTORE_KEY`, `PETSTORE_TEST_*`).
 */

export interface Lookalike {
  /** The variable as set. */
  name: string;
  /** The known variable it most likely stands for, if one is near enough to say. */
  meant: string | undefined;
}

const OWN_PREFIX = 'PETSTORE_';
const UNIT = /_(MS|SECONDS|BYTES)$/;
const OTHERS = /^(OTEL_|PG|NODE_|NPM_|npm_|UV_|SSL_|LD_|MALLOC_|FAKETIME)/;
/** The service's name in variables that are not its settings: the clients' (examples, SDK) and the project's test tools'. */
const NOT_SETTINGS = /^PETSTORE_(URL|KEY|TEST_\w+|MODEL_\w+|FAULT_\w+)$/;
const KUBERNETES_LINK = /_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)$/;
/** `NAME_PORT` is a link only by its value, a Service's address: a setting may end in `_PORT` too. */
const isKubernetesLink = (name: string, value: string) =>
  KUBERNETES_LINK.test(name) || (name.endsWith('_PORT') && /^(tcp|udp|sctp):\/\//.test(value));

/** Edits (insert, delete, substitute, swap two neighbours) from a to b, or more than `most` as soon as that is certain. */
function distance(a: string, b: string, most: number): number {
  if (Math.abs(a.length - b.length) > most) return most + 1;
  let before = Array.from({ length: b.length + 1 }, (_, j) => j);
  let previous: number[] = [];
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = before[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      let best = Math.min(before[j]! + 1, row[j - 1]! + 1, substitution);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, previous[j - 2]! + 1);
      row.push(best);
    }
    if (Math.min(...row) > most) return most + 1;
    previous = before;
    before = row;
  }
  return before[b.length]!;
}

/** How many edits still read as a slip of the same name: none for short names, where everything is near. */
const slipsAllowed = (name: string) => (name.length >= 10 ? 2 : name.length >= 6 ? 1 : 0);

/** The known name `name` most likely stands for, if any is near enough. */
function nearest(name: string, known: readonly string[]): string | undefined {
  const upper = name.toUpperCase();
  const base = upper.replace(UNIT, '');
  let best: { name: string; edits: number } | undefined;
  for (const candidate of known) {
    if (candidate.replace(UNIT, '') === base) return candidate; // another unit, or none
    const edits = distance(upper, candidate, slipsAllowed(candidate));
    if (edits <= slipsAllowed(candidate) && (best === undefined || edits < best.edits)) best = { name: candidate, edits };
  }
  return best?.name;
}

/** The variables of `env` that look like one of `known` but are not, in the order of `env`. */
export function lookalikes(env: Readonly<Record<string, string | undefined>>, known: readonly string[]): Lookalike[] {
  const knownSet = new Set(known);
  const found: Lookalike[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || knownSet.has(name) || OTHERS.test(name) || NOT_SETTINGS.test(name) || isKubernetesLink(name, value))
      continue;
    const own = name.startsWith(OWN_PREFIX);
    const meant = nearest(own ? name.slice(OWN_PREFIX.length) : name, known) ?? (own ? nearest(name, known) : undefined);
    if (meant !== undefined || own) found.push({ name, meant });
  }
  return found;
}

/** The warning for one lookalike, as the start logs it. */
export function lookalikeWarning({ name, meant }: Lookalike): string {
  const hint = meant === undefined ? 'no setting has that name' : `did you mean ${meant}?`;
  return `${name} is set but is not a setting of this service (${hint}): it is ignored`;
}
