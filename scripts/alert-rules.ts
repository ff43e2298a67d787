/**
 * The shipped alert rules (deploy/prometheus/alerts.yml) for one Prometheus: `npm run --silent alerts --
 * [--selector 'MATCHERS'] [--kube-selector 'MATCHERS'] [--runbook-base URL] > petstore-alerts.yml`. The
 * selector replaces job="petstore" wherever the rules read this service's targets (for a shared job:
 * 'job="kubernetes-pods", app_kubernetes_io_name="petstore"'); the kube selector replaces the container
 * and pod names kube-state-metrics' series are read by; the base makes each runbook_url absolute:
 * URL/docs/operations.md#alert, URL being where this repository's files are served
 * (https://git.example.com/shop/petstore/blob/v1.4.0). Set them once here rather than editing the
 * rules, so an upgrade is the same command again (docs/operations.md, "Alerts and the dashboard").
 */
import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

export const SHIPPED_RULES = new URL('../deploy/prometheus/alerts.yml', import.meta.url);
const DEFAULT_SELECTOR = 'job="petstore"';
/** kube-state-metrics' series of the service's containers: the container and pod names deploy/kubernetes gives. */
const DEFAULT_KUBE_SELECTOR = 'container="petstore", pod=~"petstore-.*"';

/** PromQL label matchers, comma-separated: name, an operator, a double-quoted value without a quote in it. */
const MATCHERS = /^\s*[a-zA-Z_]\w*\s*(=~|!~|!=|=)\s*"[^"\\]*"\s*(,\s*[a-zA-Z_]\w*\s*(=~|!~|!=|=)\s*"[^"\\]*"\s*)*$/;

export interface AlertRuleOptions {
  selector?: string;
  kubeSelector?: string;
  runbookBase?: string;
}

/** Label matchers with at least one equality (absent() takes its labels from those), checked. */
function matchers(option: string, value: string, example: string): string {
  if (!MATCHERS.test(value) || !/(^|,)\s*[a-zA-Z_]\w*\s*=\s*"[^"]+"/.test(value))
    throw new Error(`${option} takes label matchers with at least one equality, like '${example}': ${value}`);
  return value.trim();
}

/** Replaces `from` in the rules' expressions and texts; comments keep saying what was shipped. */
function replaceOutsideComments(rules: string, from: string, to: string): string {
  return rules
    .split('\n')
    .map((line) => (line.trimStart().startsWith('#') ? line : line.replaceAll(from, () => to)))
    .join('\n');
}

/** The base of absolute runbook links, checked: http or https, no query, no fragment, no trailing slash. */
function runbookPrefix(runbookBase: string): string {
  let base: URL;
  try {
    base = new URL(runbookBase);
  } catch {
    throw new Error(`--runbook-base takes an absolute URL, like https://git.example.com/shop/petstore/blob/v1.4.0: ${runbookBase}`);
  }
  if (!['http:', 'https:'].includes(base.protocol) || base.hash || base.search)
    throw new Error(`--runbook-base takes an http or https URL without a query or #: ${runbookBase}`);
  return base.href.replace(/\/+$/, '');
}

export function alertRules(rules: string, { selector, kubeSelector, runbookBase }: AlertRuleOptions): string {
  let out = rules;
  if (selector !== undefined)
    out = replaceOutsideComments(out, DEFAULT_SELECTOR, matchers('--selector', selector, 'job="petstore", namespace="shop"'));
  if (kubeSelector !== undefined) {
    const example = 'namespace="shop", container="petstore", pod=~"petstore-.*"';
    out = replaceOutsideComments(out, DEFAULT_KUBE_SELECTOR, matchers('--kube-selector', kubeSelector, example));
  }
  if (runbookBase !== undefined) {
    const prefix = runbookPrefix(runbookBase);
    out = out.replace(/^(\s+runbook_url: )docs\//gm, (_, key: string) => `${key}${prefix}/docs/`);
  }
  return out;
}

// Run as a script: node realpaths its main module, and a path with a space is escaped in the URL.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === realpathSync(process.argv[1])) {
  const { values } = parseArgs({
    options: {
      selector: { type: 'string' },
      'kube-selector': { type: 'string' },
      'runbook-base': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(
      'Usage: npm run --silent alerts -- [--selector MATCHERS] [--kube-selector MATCHERS] [--runbook-base URL] > petstore-alerts.yml\n\n' +
        'Prints deploy/prometheus/alerts.yml with its selector of the service\'s targets (job="petstore"), and of\n' +
        `its containers in kube-state-metrics' series (${DEFAULT_KUBE_SELECTOR}), replaced, and its runbook links\n` +
        'made absolute (URL/docs/operations.md#alert). See docs/operations.md, "Alerts and the dashboard".',
    );
  } else {
    try {
      const options = { selector: values.selector, kubeSelector: values['kube-selector'], runbookBase: values['runbook-base'] };
      process.stdout.write(alertRules(readFileSync(SHIPPED_RULES, 'utf8'), options));
    } catch (err) {
      console.error(`alerts: ${(err as Error).message}`);
      process.exitCode = 1;
    }
  }
}
