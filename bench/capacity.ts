/**
 * The capacity model of docs/capacity.md, applied: for each target rate, how many instances and how much
 * PostgreSQL and Redis serve it with the stated read/write mix, and which part runs out first. It only
 * computes: it measures nothing and connects to nothing. docs/capacity.md says where each input was
 * measured and how; a test (test/units/capacity-model.test.ts) keeps the table there equal to this output.
 *
 * Usage: node bench/capacity.ts [--name=value ...]          (or npm run bench:capacity -- --name=value)
 *
 * Every entry of INPUTS can be changed by its name in kebab case on the command line, or in the
 * environment as CAPACITY_ and the name in upper snake case; the command line wins. For example:
 *   --rates=1000,10000,100000,1000000        target rates, requests per second
 *   --mix=list:0.65,get:0.25,create:0.10     shares of the three operations (they must add up to 1)
 *   --cpu-per-core-utilisation=0.6           CAPACITY_CPU_PER_CORE_UTILISATION=0.6 does the same
 *   --cpu-scale=0.5                          every service CPU figure halved (a faster machine)
 *   --page-cache-hit-rate=0.5 --key-affinity=1
 */

/**
 * The model's inputs. "Run of 2026-11-23" is `npm run bench` at commit 71d4a22 (docs/capacity.md,
 * Inputs, quotes its lines): the service process's CPU time per request on PostgreSQL + Redis, the
 * median of 5 rounds and, in the *Worst* twin, the worst round. "Measured here" is docs/capacity.md,
 * Measurements: the same 2-core machine, PostgreSQL 15 and Redis 7 on it.
 */
const INPUTS = {
  // The question.
  /** Target rates, requests per second. */
  rates: [1_000, 10_000, 100_000, 1_000_000],
  /** Shares of list pages, lookups by id and creates: the benchmark's realistic mix (bench/mix.ts). */
  mix: { list: 0.65, get: 0.25, create: 0.1 },
  /** Assumption: plan every core (instances, PostgreSQL, Redis) to this share, for bursts, GC and neighbours. */
  cpuPerCoreUtilisation: 0.6,
  /** Assumption: never fewer instances than this, so that one can fail or be replaced. */
  minInstances: 2,

  // Service CPU per request, µs (run of 2026-11-23; scenario named in each comment).
  /** 'PostgreSQL+Redis 1k: GET /v1/pets?limit=20': a list page served from the page cache. */
  cpuListHitUs: 139.7,
  cpuListHitWorstUs: 191.1,
  /** 'PostgreSQL+Redis 1k, no page cache: GET /v1/pets?limit=20': a list page read from PostgreSQL. */
  cpuListMissUs: 336.9,
  cpuListMissWorstUs: 874.9,
  /** 'PostgreSQL+Redis 1k: GET /v1/pets/{id}': always the same id, so a pet cache hit. */
  cpuGetUs: 125.3,
  cpuGetWorstUs: 135.8,
  /** 'PostgreSQL+Redis: POST /v1/pets': a create without an Idempotency-Key (one INSERT). */
  cpuCreateUs: 431.3,
  cpuCreateWorstUs: 664.3,
  /**
   * One more statement inside the service, for what the benchmark did not exercise (pet and key cache
   * misses, an idempotent create's two extra statements): bare node-postgres, a named prepared one-row
   * SELECT, floors of 2026-11-23 (rounds of 62.7, 38.0 and 44.7 µs).
   */
  cpuStatementUs: 44.7,
  cpuStatementWorstUs: 62.7,
  /** Multiplies every service CPU figure above: 1 is the benchmark's machine. */
  cpuScale: 1,

  // The caches, each per instance (docs/capacity.md, "What each request costs").
  /** Assumption: list pages found in the page cache. 0 is the worst case; on PostgreSQL a page lives 1 s. */
  pageCacheHitRate: 0,
  /** Assumption: lookups by id found in the pet cache (10,000 pets per instance). 0 is the worst case. */
  petCacheHitRate: 0,
  /** KEY_CACHE_TTL_MS, default 2000 (src/config.ts); a key's ban state is kept as long. */
  keyCacheTtlMs: 2_000,
  /** Assumption: requests per second of an average active key, as in the realistic mix (1,674 req/s, 1,000 keys). */
  requestsPerKeyPerSecond: 1.674,
  /** 0: requests spread over instances (deploy/nginx.conf); 1: the load balancer sends each key to one instance (not built). */
  keyAffinity: 0,
  /** Share of creates that carry an Idempotency-Key: the project's client sends one with every create. */
  idempotentCreateShare: 1,

  // PostgreSQL, measured here (docs/capacity.md, "Statements per second in PostgreSQL"): pgbench, 10
  // clients, prepared, on the 2 cores it shared with its client; the lower of two runs, with its latency.
  // Statements are counted in those kinds, so each kind's cost is its own (a page costs 2.5 selects).
  pgCores: 2,
  /** A one-row SELECT by primary key (a pet, a key by its hash, a ban). */
  pgSelectsPerSecond: 46_861,
  pgSelectMs: 0.213,
  /** The list statement: 20 pets after a cursor, as JSON text. */
  pgPagesPerSecond: 18_852,
  pgPageMs: 0.53,
  /** A create without an Idempotency-Key: one INSERT, committed. */
  pgInsertsPerSecond: 8_503,
  pgInsertMs: 1.176,
  /** A create with one: three statements (src/storage/postgres/idempotency.ts), two commits. */
  pgIdempotentCreatesPerSecond: 3_046,
  pgIdempotentCreateMs: 3.283,
  /** PostgreSQL's default max_connections. */
  pgMaxConnections: 100,
  /** Connections per instance: the pg pool's size in src/storage/postgres/store.ts. */
  poolSize: 10,
  /** Assumption: the largest primary planned for, in cores of this machine; writes assumed to scale to it. */
  pgPrimaryMaxCores: 32,
  /** Bytes per pet, table and both indexes (docs/capacity.md, "Bytes per pet..."): without an Idempotency-Key / with one. */
  petBytes: 177,
  petBytesIdempotent: 140,
  /** Bytes per idempotency claim, kept 24 hours. */
  claimBytes: 314,

  // Redis, measured here (docs/capacity.md, "Redis CPU per limiter call", "Bytes per active key in Redis").
  /** Redis CPU per limiter call (one script, two counters), over 1.5 million calls of the benchmark run. */
  redisCallUs: 16.9,
  /** Redis memory per active key: its minute and day counters with their expiry entries. */
  redisBytesPerKey: 335,
  /** Assumption: the busiest key's share of all requests (its counters live on one Redis shard). */
  hottestKeyShare: 0.05,

  // The instance.
  /** Peak RSS, MiB, of the PostgreSQL + Redis mix server: the highest of four runs (BENCHMARKS.md and 2026-11-23). */
  instanceRssMiB: 148,

  // The check against the one measured mix (run of 2026-11-23, 'PostgreSQL+Redis 10k: realistic mix, 1,000 keys').
  checkRate: 1_674,
  checkKeys: 1_000,
  checkMeasuredUs: 523.0,
  checkMeasuredMinUs: 331.6,
  checkMeasuredMaxUs: 646.7,
};

type Inputs = typeof INPUTS;

/** The inputs with any overrides from the environment (CAPACITY_NAME) and the command line (--name=value). */
function readInputs(argv: readonly string[], env: Record<string, string | undefined>): Inputs {
  const inputs: Inputs = structuredClone(INPUTS);
  const settable = inputs as unknown as Record<string, unknown>;
  const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());
  const set = (name: string, raw: string, from: string) => {
    const old = settable[name];
    const number = (text: string) => {
      const value = Number(text);
      if (text.trim() === '' || !Number.isFinite(value)) throw new Error(`${from}: ${JSON.stringify(text)} is not a number`);
      return value;
    };
    if (Array.isArray(old)) settable[name] = raw.split(',').map(number);
    else if (typeof old === 'object') {
      const shares = Object.fromEntries(
        raw
          .split(',')
          .map((part) => part.split(':'))
          .map(([k, v]) => [k, number(v ?? '')]),
      );
      for (const k of Object.keys(old!)) if (!(k in shares)) throw new Error(`${from}: give a share for ${k}`);
      settable[name] = shares;
    } else settable[name] = number(raw);
  };
  for (const name of Object.keys(INPUTS)) {
    const variable = 'CAPACITY_' + kebab(name).replace(/-/g, '_').toUpperCase();
    if (env[variable] !== undefined) set(name, env[variable], variable);
  }
  for (const arg of argv) {
    const [, option, value] = /^--([a-z0-9-]+)=(.*)$/.exec(arg) ?? [];
    const name = Object.keys(INPUTS).find((n) => kebab(n) === option);
    if (name === undefined || value === undefined) {
      throw new Error(`unknown argument ${arg}; use --name=value with one of: ${Object.keys(INPUTS).map(kebab).join(', ')}`);
    }
    set(name, value, '--' + option);
  }
  const shares = Object.values(inputs.mix).reduce((a, b) => a + b, 0);
  if (Math.abs(shares - 1) > 0.001) throw new Error(`the mix's shares add up to ${shares}, not 1`);
  return inputs;
}

/** What one target rate needs, with the service CPU figures of the median or of the worst round. */
function plan(i: Inputs, rate: number, worst = false, fixed?: { instances: number; keys: number }) {
  const cpu = worst
    ? {
        hit: i.cpuListHitWorstUs,
        miss: i.cpuListMissWorstUs,
        get: i.cpuGetWorstUs,
        create: i.cpuCreateWorstUs,
        stmt: i.cpuStatementWorstUs,
      }
    : { hit: i.cpuListHitUs, miss: i.cpuListMissUs, get: i.cpuGetUs, create: i.cpuCreateUs, stmt: i.cpuStatementUs };
  const { list, get, create } = i.mix;
  const keys = fixed?.keys ?? rate / i.requestsPerKeyPerSecond;
  const perKey = rate / keys;
  // A key's cache entry is filled by a miss and then serves every request of that key reaching the same
  // instance within the TTL: with requests at λ per second there, 1 miss per 1 + λ·TTL requests. Spread
  // over N instances each sees 1/N of a key's requests, so the key cache helps less as instances are added.
  const keyMissRate = (instances: number) => 1 / (1 + ((i.keyAffinity ? perKey : perKey / instances) * i.keyCacheTtlMs) / 1000);
  const cpuPerRequest = (keyMiss: number) =>
    i.cpuScale *
    (list * (i.pageCacheHitRate * cpu.hit + (1 - i.pageCacheHitRate) * cpu.miss) +
      get * (cpu.get + (1 - i.petCacheHitRate) * cpu.stmt) +
      create * (cpu.create + i.idempotentCreateShare * 2 * cpu.stmt) +
      keyMiss * 2 * cpu.stmt); // a missed key costs its lookup and its ban's
  const instancesFor = (us: number) => Math.max(i.minInstances, Math.ceil((rate * us) / 1e6 / i.cpuPerCoreUtilisation));
  // More instances, more key misses, more CPU: iterate until the count holds (it only grows, so it stops).
  let instances = fixed?.instances ?? i.minInstances;
  for (let n = 0; n < 100 && !fixed; n++) {
    const next = instancesFor(cpuPerRequest(keyMissRate(instances)));
    if (next === instances) break;
    instances = next;
  }
  const keyMiss = keyMissRate(instances);

  const pages = rate * list * (1 - i.pageCacheHitRate);
  const selects = rate * get * (1 - i.petCacheHitRate) + rate * keyMiss * 2;
  const plainCreates = rate * create * (1 - i.idempotentCreateShare);
  const idempotentCreates = rate * create * i.idempotentCreateShare;
  const pgReadCores = ((pages / i.pgPagesPerSecond + selects / i.pgSelectsPerSecond) * i.pgCores) / i.cpuPerCoreUtilisation;
  const pgWriteCores =
    ((plainCreates / i.pgInsertsPerSecond + idempotentCreates / i.pgIdempotentCreatesPerSecond) * i.pgCores) / i.cpuPerCoreUtilisation;
  // Through a pooler a server connection is taken for one statement (or transaction) at a time, so the
  // connections busy are the statement rate times the time each holds one (Little's law).
  const busyConnections =
    (pages * i.pgPageMs + selects * i.pgSelectMs + plainCreates * i.pgInsertMs + idempotentCreates * i.pgIdempotentCreateMs) / 1000;
  const redisCores = (rate * i.redisCallUs) / 1e6 / i.cpuPerCoreUtilisation;
  const hotKeyCores = redisCores * i.hottestKeyShare;
  return {
    rate,
    cpuUs: cpuPerRequest(keyMiss),
    instances,
    keyMiss,
    memoryMiB: instances * i.instanceRssMiB,
    pgStatements: pages + selects + plainCreates + 3 * idempotentCreates,
    pgWrites: plainCreates + 2 * idempotentCreates,
    pgCores: pgReadCores + pgWriteCores,
    pgWriteCores,
    directConnections: instances * i.poolSize,
    pooledConnections: Math.ceil(busyConnections / i.cpuPerCoreUtilisation),
    redisCalls: rate,
    redisShards: Math.max(1, Math.ceil(redisCores)),
    redisBytes: keys * i.redisBytesPerKey,
    petBytesPerDay: rate * create * 86_400 * (i.idempotentCreateShare * i.petBytesIdempotent + (1 - i.idempotentCreateShare) * i.petBytes),
    claimBytesHeld: idempotentCreates * 86_400 * i.claimBytes,
    // Each limit's load, where 1 is the limit (the sections of docs/capacity.md say what is done about each).
    limits: {
      'PostgreSQL connections without a pooler': (instances * i.poolSize) / i.pgMaxConnections,
      'one PostgreSQL primary, every statement': (pgReadCores + pgWriteCores) / i.pgPrimaryMaxCores,
      'one PostgreSQL primary, writes alone': pgWriteCores / i.pgPrimaryMaxCores,
      'one Redis': redisCores,
      "the hottest key's Redis shard": hotKeyCores,
    } as Record<string, number>,
  };
}

const whole = (n: number) => String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
const percent = (n: number) => `${whole(n * 100)} %`;
function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  for (; n >= 1024 && u < units.length - 1; u++) n /= 1024;
  return `${n >= 100 || u === 0 ? whole(n) : n.toFixed(1)} ${units[u]}`;
}

/** The report as Markdown: the sizing table, where each part runs out, and the check against the measured mix. */
function report(i: Inputs): string {
  const rows = i.rates.map((rate) => ({ median: plan(i, rate), worst: plan(i, rate, true) }));
  const { list, get, create } = i.mix;
  const out = [
    `Mix: list ${percent(list)}, get ${percent(get)}, create ${percent(create)}; every core planned to ` +
      `${percent(i.cpuPerCoreUtilisation)}; page cache hits ${percent(i.pageCacheHitRate)}, pet cache hits ` +
      `${percent(i.petCacheHitRate)}; creates with an Idempotency-Key ${percent(i.idempotentCreateShare)}; ` +
      `${i.requestsPerKeyPerSecond} requests/s per active key; key affinity ${i.keyAffinity ? 'on' : 'off'}; ` +
      `service CPU × ${i.cpuScale}. Service figures at the benchmark's medians, (in brackets) at its worst rounds.`,
    '',
    '| Requests/s | Service CPU µs/request | Instances (cores) | Instance memory | Key cache misses | PostgreSQL statements/s | of which commits/s | PostgreSQL cores | PostgreSQL connections: direct / through a pooler | Redis calls/s | Redis shards | Redis memory | Pets stored per day (claims held) |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const { median: m, worst: w } of rows) {
    out.push(
      `| ${whole(m.rate)} | ${m.cpuUs.toFixed(0)} (${w.cpuUs.toFixed(0)}) | ${whole(m.instances)} (${whole(w.instances)}) | ` +
        `${bytes(m.memoryMiB * 2 ** 20)} | ${percent(m.keyMiss)} | ${whole(m.pgStatements)} | ${whole(m.pgWrites)} | ${m.pgCores.toFixed(1)} | ` +
        `${whole(m.directConnections)} (${whole(w.directConnections)}) / ${whole(m.pooledConnections)} | ${whole(m.redisCalls)} | ` +
        `${whole(m.redisShards)} | ${bytes(m.redisBytes)} | ${bytes(m.petBytesPerDay)} (${bytes(m.claimBytesHeld)}) |`,
    );
  }
  const names = Object.keys(rows[0]!.median.limits);
  out.push('', `| Requests/s | ${names.join(' | ')} | Reached first |`, `|---:|${names.map(() => '---:|').join('')}---|`);
  for (const { median: m } of rows) {
    const loads = Object.entries(m.limits);
    const [first, load] = loads.reduce((a, b) => (b[1] > a[1] ? b : a));
    out.push(`| ${whole(m.rate)} | ${loads.map(([, l]) => percent(l)).join(' | ')} | ${load >= 1 ? first : 'none'} |`);
  }
  // Every load grows with the rate, so halving the interval (on a log scale) finds where each reaches 1.
  const reachedAt = names.map((name) => {
    let [low, high] = [1, 1e12];
    if (plan(i, high).limits[name]! < 1) return Infinity;
    for (let n = 0; n < 80; n++) {
      const mid = Math.sqrt(low * high);
      if (plan(i, mid).limits[name]! >= 1) high = mid;
      else low = mid;
    }
    return Number(high.toPrecision(2));
  });
  const soonest = reachedAt.indexOf(Math.min(...reachedAt));
  out.push(`| reached at about | ${reachedAt.map((r) => (r === Infinity ? 'never' : whole(r))).join(' | ')} | ${names[soonest]} |`);
  const fixed = { instances: 1, keys: i.checkKeys };
  const bench = { ...i, idempotentCreateShare: 0, pageCacheHitRate: 0, petCacheHitRate: 0, cpuScale: 1, keyAffinity: 0 };
  out.push(
    '',
    `Check against the measured mix: at its own conditions (${whole(i.checkRate)} requests/s on one instance, ` +
      `${whole(i.checkKeys)} keys, no Idempotency-Key, no cache hits counted) the model gives ` +
      `${plan(bench, i.checkRate, false, fixed).cpuUs.toFixed(0)} µs per request at the medians and ` +
      `${plan(bench, i.checkRate, true, fixed).cpuUs.toFixed(0)} at the worst rounds; the run measured ` +
      `${i.checkMeasuredUs.toFixed(1)} µs (rounds ${i.checkMeasuredMinUs.toFixed(1)}–${i.checkMeasuredMaxUs.toFixed(1)}).`,
  );
  return out.join('\n');
}

try {
  console.log(report(readInputs(process.argv.slice(2), process.env)));
} catch (err) {
  console.error(`capacity: ${(err as Error).message}`);
  process.exit(2);
}
