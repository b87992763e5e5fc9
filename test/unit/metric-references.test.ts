/**
 * Every metric the Grafana dashboard and the alert rules query is one the agent exports (or
 * Prometheus' own `up`), every query parses as PromQL, and docs/operations/monitoring.md documents every metric.
 * The exported names come from the agent's own registry (createMetrics), so a renamed metric
 * breaks this test, not a dashboard in production.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { parse } from 'yaml';
import { createMetrics } from '../../agent/observability/metrics';

const ROOT = path.join(__dirname, '..', '..');

/** The series names the agent's registry exports: counters as named, histograms with their suffixes. */
async function exportedNames(): Promise<Set<string>> {
  const metrics = createMetrics({ defaultMetrics: true });
  const names = new Set<string>();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    // prom-client's typings call `type` an enum; at run time it is the text of the TYPE line.
    const type = String(m.type);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(`${m.name}${s}`);
    else if (type === 'summary') for (const s of ['', '_sum', '_count']) names.add(`${m.name}${s}`);
    else names.add(m.name);
  }
  return names;
}

/** Grafana's interval variables are not PromQL; a fixed duration stands in for them. */
function withoutGrafanaVariables(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b/g, '5m');
}

/** The metric names an expression selects, and its syntax errors (as offsets). */
function selectedMetrics(expr: string): { names: string[]; errors: number[] } {
  const text = withoutGrafanaVariables(expr);
  const names: string[] = [];
  const errors: number[] = [];
  parser.parse(text).iterate({
    enter(node) {
      if (node.type.isError) errors.push(node.from);
      if (node.name === 'VectorSelector') {
        const id = node.node.getChild('Identifier');
        if (id !== null) names.push(text.slice(id.from, id.to));
      }
    },
  });
  return { names, errors };
}

interface Panel {
  title: string;
  targets?: Array<{ expr: string }>;
  panels?: Panel[];
}

const dashboard = JSON.parse(fs.readFileSync(path.join(ROOT, 'deploy', 'grafana', 'etcd-lifecycle-agent.json'), 'utf8')) as {
  panels: Panel[];
  templating: { list: Array<{ name: string; definition?: string }> };
};
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const dashboardExprs = panels.flatMap((p) => (p.targets ?? []).map((t) => [`${p.title}`, t.expr] as const));
const rules = parse(fs.readFileSync(path.join(ROOT, 'deploy', 'prometheus', 'rules.yaml'), 'utf8')) as {
  groups: Array<{ rules: Array<{ alert: string; expr: string }> }>;
};
const ruleExprs = rules.groups.flatMap((g) => g.rules.map((r) => [r.alert, r.expr] as const));

describe('metric references', () => {
  let exported: Set<string>;
  beforeAll(async () => {
    exported = await exportedNames();
  });

  it('when the selector parser meets a known expression, then it finds its metrics and only them', () => {
    expect(selectedMetrics('histogram_quantile(0.95, sum by (le) (rate(a_bucket{x="$y"}[$__rate_interval]))) > on (job) b')).toEqual({
      names: ['a_bucket', 'b'],
      errors: [],
    });
    expect(selectedMetrics('sum by (le (rate(a[5m])').errors.length).toBeGreaterThan(0);
  });

  it.each([...dashboardExprs, ...ruleExprs])('when "%s" is parsed, then it is PromQL over exported metrics only', (_where, expr) => {
    const { names, errors } = selectedMetrics(expr);
    expect(errors).toEqual([]);
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((n) => !exported.has(n) && n !== 'up')).toEqual([]);
  });

  it('when the dashboard variables list label values, then they read an exported metric', () => {
    const defs = dashboard.templating.list.flatMap((v) => (v.definition === undefined ? [] : [v.definition]));
    expect(defs.length).toBe(2);
    for (const def of defs) expect(exported.has(/^label_values\((\w+)/.exec(def)?.[1] ?? '')).toBe(true);
  });

  it('when the dashboard is read, then it shows status, fault tolerance, members by role, changes in flight, call outcomes and observation age', () => {
    const used = new Set(dashboardExprs.flatMap(([, e]) => selectedMetrics(e).names));
    for (const name of [
      'etcd_agent_cluster_status',
      'etcd_agent_quorum_fault_tolerance',
      'etcd_agent_quorum_voters',
      'etcd_agent_cluster_learners',
      'etcd_agent_operations_in_flight',
      'etcd_agent_actions_total',
      'etcd_agent_health_observation_age_seconds',
    ]) {
      expect(used.has(name)).toBe(true);
    }
  });

  it("when docs/operations/monitoring.md is read, then it documents every one of the agent's own metrics", async () => {
    const doc = fs.readFileSync(path.join(ROOT, 'docs/operations/monitoring.md'), 'utf8');
    const own = (await createMetrics({ defaultMetrics: false }).registry.getMetricsAsJSON()).map((m) => m.name);
    expect(own.length).toBeGreaterThan(15);
    expect(own.filter((name) => !doc.includes(`\`${name}`))).toEqual([]);
  });
});
