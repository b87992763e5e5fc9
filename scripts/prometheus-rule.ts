/**
 * deploy/prometheus/rules.yaml (the plain rules file, the one source of truth) → the same groups as
 * a Prometheus Operator PrometheusRule, deploy/prometheus/prometheusrule.yaml. Invariant: the
 * PrometheusRule's `spec.groups` is exactly the rules file's `groups`; test/unit/alert-rules.test.ts
 * checks the committed file is this function's output.
 *
 * `node dist/scripts/prometheus-rule.js` (after `npm run build`) rewrites the PrometheusRule.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse, stringify } from 'yaml';

/** Where the two files live, relative to the repository root. */
export const RULES_FILE = 'deploy/prometheus/rules.yaml';
export const PROMETHEUS_RULE_FILE = 'deploy/prometheus/prometheusrule.yaml';

const HEADER = `# Generated from ${RULES_FILE} by scripts/prometheus-rule.ts: edit that file, then run
# \`npm run build && node dist/scripts/prometheus-rule.js\`. test/unit/alert-rules.test.ts checks the two agree.
# Prometheus Operator picks a PrometheusRule up when its labels match the Prometheus' ruleSelector
# (kube-prometheus-stack: \`release: <its release name>\`); add that label here or in an overlay.
`;

/** The PrometheusRule manifest (YAML text) that carries the groups of `rulesText`. Throws when it has none. */
export function toPrometheusRule(rulesText: string): string {
  const rules = parse(rulesText) as { groups?: unknown };
  if (!Array.isArray(rules?.groups) || rules.groups.length === 0) throw new Error(`${RULES_FILE} has no groups`);
  const manifest = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'etcd-lifecycle-agent', labels: { 'app.kubernetes.io/name': 'etcd-lifecycle-agent' } },
    spec: { groups: rules.groups },
  };
  return HEADER + stringify(manifest, { lineWidth: 0 });
}

/** The repository root: the nearest directory above this file that holds the rules file (src or dist). */
function repositoryRoot(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, RULES_FILE))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`${RULES_FILE} not found above ${__dirname}`);
  }
}

if (require.main === module) {
  const root = repositoryRoot();
  fs.writeFileSync(path.join(root, PROMETHEUS_RULE_FILE), toPrometheusRule(fs.readFileSync(path.join(root, RULES_FILE), 'utf8')));
  process.stdout.write(`wrote ${PROMETHEUS_RULE_FILE}\n`);
}
