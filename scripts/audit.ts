/**
 * `npm run audit`: fails when a production dependency has a high or critical advisory.
 *
 * When the advisory database cannot be reached (an offline machine, or a registry mirror that does not
 * serve the audit endpoint), it says so in a loud banner and does not fail: that is a fact about the
 * network, not about the dependencies, and the check runs again wherever the endpoint answers.
 */
import { spawnSync } from 'node:child_process';

const run = spawnSync('npm', ['audit', '--omit=dev', '--audit-level=high', '--json'], { encoding: 'utf8' });
let report: {
  metadata?: { vulnerabilities?: Record<string, number> };
  statusCode?: number;
  message?: string;
  error?: { summary?: string };
};
try {
  report = JSON.parse(run.stdout);
} catch {
  console.error(run.stdout, run.stderr);
  throw new Error('npm audit printed no JSON report');
}

const counts = report.metadata?.vulnerabilities;
if (!counts) {
  const why = report.message ?? report.error?.summary ?? `exit status ${run.status}`;
  const line = '#'.repeat(78);
  console.log([line, '#  npm audit: the advisory database could not be reached; nothing was checked.', `#  ${why}`, line].join('\n'));
  process.exit(0);
}
const serious = (counts.high ?? 0) + (counts.critical ?? 0);
console.log(
  `npm audit (production dependencies): ${Object.entries(counts)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')}`,
);
if (serious > 0) {
  console.error(spawnSync('npm', ['audit', '--omit=dev', '--audit-level=high'], { encoding: 'utf8' }).stdout);
  process.exit(1);
}
