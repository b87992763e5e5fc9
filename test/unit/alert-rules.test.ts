/**
 * The alert rules (deploy/prometheus/) checked and unit-tested by Debian's promtool: every alert has
 * a promtool test that shows it firing and one that shows it silent, and the PrometheusRule is the
 * rules file's own output. test/integration/prometheus-alerts.test.ts runs them on a real Prometheus.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { PROMETHEUS_RULE_FILE, RULES_FILE, toPrometheusRule } from '../../scripts/prometheus-rule';

const ROOT = path.join(__dirname, '..', '..');
const PROMTOOL_TESTS = 'test/prometheus/alerts.test.yaml';

function promtool(args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile('promtool', args, { cwd: ROOT, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
      resolve({ code, output: `${stdout}${stderr}${err !== null && code === -1 ? err.message : ''}` });
    });
  });
}

interface RuleTest {
  alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }>;
}

const rules = parse(fs.readFileSync(path.join(ROOT, RULES_FILE), 'utf8')) as { groups: Array<{ rules: Array<{ alert?: string }> }> };
const alerts = rules.groups.flatMap((g) => g.rules.map((r) => r.alert)).filter((a): a is string => a !== undefined);
const tests = (parse(fs.readFileSync(path.join(ROOT, PROMTOOL_TESTS), 'utf8')) as { tests: RuleTest[] }).tests;
const cases = tests.flatMap((t) => t.alert_rule_test ?? []);

describe('alert rules', () => {
  it('when promtool checks the rules file, then it is valid', async () => {
    const { code, output } = await promtool(['check', 'rules', RULES_FILE]);
    expect(output).toContain(`SUCCESS: ${alerts.length} rules found`);
    expect(code).toBe(0);
  });

  it('when promtool runs the unit tests, then every one passes', async () => {
    const { code, output } = await promtool(['test', 'rules', PROMTOOL_TESTS]);
    expect(output).toContain('SUCCESS');
    expect(output).not.toContain('FAILED');
    expect(code).toBe(0);
  });

  it('when the rules are listed, then they are the eleven the operator needs', () => {
    expect([...alerts].sort()).toEqual([
      'EtcdAgentDown',
      'EtcdAgentObservationUnknown',
      'EtcdBackupStale',
      'EtcdBackupUnverified',
      'EtcdDatabaseNearQuota',
      'EtcdLearnerNotPromoted',
      'EtcdMembershipCallsFailing',
      'EtcdMembershipChangeStuck',
      'EtcdNoFaultTolerance',
      'EtcdNoSpaceAlarm',
      'EtcdQuorumLost',
    ]);
  });

  it.each(alerts)('when %s is unit-tested, then a promtool case shows it firing and another shows it silent', (alert) => {
    const own = cases.filter((c) => c.alertname === alert);
    expect(own.filter((c) => (c.exp_alerts ?? []).length > 0).length).toBeGreaterThanOrEqual(1);
    expect(own.filter((c) => (c.exp_alerts ?? []).length === 0).length).toBeGreaterThanOrEqual(1);
  });

  it('when the PrometheusRule is compared with the rules file, then it is exactly its generated form', () => {
    const committed = fs.readFileSync(path.join(ROOT, PROMETHEUS_RULE_FILE), 'utf8');
    expect(committed).toBe(toPrometheusRule(fs.readFileSync(path.join(ROOT, RULES_FILE), 'utf8')));
    const manifest = parse(committed) as { spec: { groups: unknown } };
    expect(manifest.spec.groups).toEqual(rules.groups);
  });
});
