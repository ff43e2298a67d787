/**
 * The shipped alert rules (deploy/prometheus/alerts.yml) for one Prometheus: `npm run --silent alerts --
 * [--selector 'MATCHERS'] [--runbook-base URL] > petstore-alerts.yml`. The selector replaces
 * job="petstore" wherever the rules read this service's targets (for a shared job:
 * 'job="kubernetes-pods", app_kubernetes_io_name="petstore"'); the base makes each runbook_url
 * absolute: URL/docs/operations.md#alert, URL being where this repository's files are served
 * (https://git.example.com/shop/petstore/blob/v1.4.0). Set both once here rather than editing the
 * rules, so an upgrade is the same command again (docs/operations.md, "Alerts and the dashboard").
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

export const SHIPPED_RULES = new URL('../deploy/prometheus/alerts.yml', import.meta.url);
const DEFAULT_SELECTOR = 'job="petstore"';

/** PromQL label matchers, comma-separated: name, an operator, a double-quoted value without a quote in it. */
const MATCHERS = /^\s*[a-zA-Z_]\w*\s*(=~|!~|!=|=)\s*"[^"\\]*"\s*(,\s*[a-zA-Z_]\w*\s*(=~|!~|!=|=)\s*"[^"\\]*"\s*)*$/;

export function alertRules(rules: string, { selector, runbookBase }: { selector?: string; runbookBase?: string }): string {
  let out = rules;
  if (selector !== undefined) {
    if (!MATCHERS.test(selector) || !/(^|,)\s*[a-zA-Z_]\w*\s*=\s*"[^"]+"/.test(selector))
      throw new Error(`--selector takes label matchers with at least one equality, like 'job="petstore", namespace="shop"': ${selector}`);
    // The rules' expressions and texts; comments keep saying what was shipped.
    out = out
      .split('\n')
      .map((line) => (line.trimStart().startsWith('#') ? line : line.replaceAll(DEFAULT_SELECTOR, selector.trim())))
      .join('\n');
  }
  if (runbookBase !== undefined) {
    let base: URL;
    try {
      base = new URL(runbookBase);
    } catch {
      throw new Error(`--runbook-base takes an absolute URL, like https://git.example.com/shop/petstore/blob/v1.4.0: ${runbookBase}`);
    }
    if (!['http:', 'https:'].includes(base.protocol) || base.hash || base.search)
      throw new Error(`--runbook-base takes an http or https URL without a query or #: ${runbookBase}`);
    const prefix = base.href.replace(/\/+$/, '');
    out = out.replace(/^(\s+runbook_url: )docs\//gm, `$1${prefix}/docs/`);
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { selector: { type: 'string' }, 'runbook-base': { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    console.log(
      'Usage: npm run --silent alerts -- [--selector \'job="petstore"\'] [--runbook-base URL] > petstore-alerts.yml\n\n' +
        "Prints deploy/prometheus/alerts.yml with its selector of the service's targets replaced and its\n" +
        'runbook links made absolute (URL/docs/operations.md#alert). See docs/operations.md, "Alerts and the dashboard".',
    );
  } else {
    try {
      process.stdout.write(
        alertRules(readFileSync(SHIPPED_RULES, 'utf8'), { selector: values.selector, runbookBase: values['runbook-base'] }),
      );
    } catch (err) {
      console.error(`alerts: ${(err as Error).message}`);
      process.exitCode = 1;
    }
  }
}
