/**
 * Metric and label names on both sides of a scrape: what a server's Prometheus text exposition exports
 * (families, the series names they give, and each series's labels), and what a PromQL expression names
 * (its series selectors with their label matchers, and the labels it groups or matches by). A small
 * tokenizer, not a PromQL parser: enough for the expressions this project ships, and strict where it
 * is unsure (an identifier it cannot place is taken for a metric name, which must then exist).
 */

/** The series an exposition exports under one name, each as its labels. */
export type ExportedSeries = Map<string, Record<string, string>[]>;

/**
 * Every series name a server exports, from its `# TYPE` lines (a family with no series yet still
 * counts), mapped to the labels of each of its series. A histogram's family name is no series name:
 * Prometheus stores its `_bucket`, `_sum` and `_count`; a summary keeps its own name for its quantiles.
 */
export function exportedSeries(exposition: string): ExportedSeries {
  const series: ExportedSeries = new Map();
  for (const [, name, type] of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const names = type === 'histogram' ? ['_bucket', '_sum', '_count'] : type === 'summary' ? ['', '_sum', '_count'] : [''];
    for (const suffix of names) series.set(name! + suffix, []);
  }
  for (const line of exposition.split('\n')) {
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+/.exec(line);
    if (!sample) continue;
    const labels: Record<string, string> = {};
    for (const [, label, value] of (sample[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[label!] = value!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    const known = series.get(sample[1]!);
    if (known) known.push(labels);
    else series.set(sample[1]!, [labels]);
  }
  return series;
}

export interface LabelMatcher {
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}

/** One series selector of an expression: a metric name (undefined for `{__name__=...}` alone) and its matchers. */
export interface Selector {
  name: string | undefined;
  matchers: LabelMatcher[];
}

export interface ExpressionNames {
  selectors: Selector[];
  /** Labels named by `by`, `without`, `on`, `ignoring`, `group_left` and `group_right`. */
  grouping: string[];
}

/** Keywords and operators that read as identifiers but name no series. */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'atan2',
  'inf',
  'nan',
  // Aggregations may put `by (...)` between their name and their parenthesis.
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
]);
const GROUPING = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);

const TOKEN =
  /\s+|#[^\n]*|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`|\{(?:[^}"']|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')*\}|\[[^\]]*\]|[a-zA-Z_:][a-zA-Z0-9_:]*|[0-9.][0-9a-zA-Z_.]*|\(|\)|,|@|[-+*/%^=!<>~]+/y;

function unquote(quoted: string): string {
  return quoted.slice(1, -1).replace(/\\(.)/g, '$1');
}

function matchersOf(block: string): LabelMatcher[] {
  const matchers: LabelMatcher[] = [];
  const inner = block.slice(1, -1);
  const matcher = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)\s*(?:,|$)/y;
  while (matcher.lastIndex < inner.length) {
    const start = matcher.lastIndex;
    const found = matcher.exec(inner);
    if (!found) throw new Error(`cannot read the label matchers ${block} from position ${start}`);
    matchers.push({ label: found[1]!, op: found[2] as LabelMatcher['op'], value: unquote(found[3]!) });
  }
  return matchers;
}

/** The selectors and grouping labels of a PromQL expression. */
export function namesInExpression(expr: string): ExpressionNames {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < expr.length) {
    const at = TOKEN.lastIndex;
    const token = TOKEN.exec(expr);
    if (!token) throw new Error(`cannot read ${JSON.stringify(expr)} at ${JSON.stringify(expr.slice(at, at + 20))}`);
    if (!/^\s|^#/.test(token[0])) tokens.push(token[0]);
  }
  const selectors: Selector[] = [];
  const grouping: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    const next = tokens[i + 1];
    if (token.startsWith('{')) {
      // A selector of matchers alone (its name, if any, is a __name__ matcher).
      const matchers = matchersOf(token);
      selectors.push({ name: matchers.find((m) => m.label === '__name__' && m.op === '=')?.value, matchers });
      continue;
    }
    if (!/^[a-zA-Z_:]/.test(token)) continue;
    if (GROUPING.has(token) && next === '(') {
      for (i += 2; tokens[i] !== ')'; i++) {
        if (tokens[i] === undefined) throw new Error(`unclosed ${token} ( in ${expr}`);
        if (tokens[i] !== ',') grouping.push(tokens[i]!);
      }
      continue;
    }
    if (next === '(' || KEYWORDS.has(token.toLowerCase())) continue; // a function, an aggregation, a keyword
    if (next?.startsWith('{')) {
      selectors.push({ name: token, matchers: matchersOf(next) });
      i++;
    } else selectors.push({ name: token, matchers: [] });
  }
  return { selectors, grouping };
}
