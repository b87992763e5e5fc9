/**
 * The alert rules on a real Prometheus (Debian's), scraping three real agents beside a real
 * 3-member etcd cluster on loopback: kill two members and EtcdQuorumLost goes pending, then fires
 * once its `for` has passed (not before, and within `for` plus a scrape, an evaluation and one
 * observation); bring them back and it resolves.
 */
import path from 'node:path';
import { parse } from 'yaml';
import fs from 'node:fs';
import type { RunningAgent } from '../../agent/agent';
import { withCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import { startMemberAgent } from '../helpers/membership';
import { ActiveAlert, TestPrometheus } from '../helpers/prometheus';

const ROOT = path.join(__dirname, '..', '..');
const RULES = path.join(ROOT, 'deploy', 'prometheus', 'rules.yaml');
// A scrape may take up to its interval (its timeout): 2 s is twice the one observation (≤ 1 s) a scrape may wait for.
const SCRAPE_S = 2;
const EVAL_S = 1;
const NAMES = ['etcd-0', 'etcd-1', 'etcd-2'];
/** ETCD_AGENT_HEALTH_MAX_AGE_MS (the default) in seconds: how old an observation a scrape may be served. */
const MAX_AGE_S = 1;

/** The `for` of an alert in the rules file, in seconds. */
function forSeconds(alert: string): number {
  const rules = parse(fs.readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Array<{ alert?: string; for?: string }> }> };
  const rule = rules.groups.flatMap((g) => g.rules).find((r) => r.alert === alert);
  const match = /^(\d+)(s|m)$/.exec(rule?.for ?? '');
  if (match === null) throw new Error(`no for: of ${alert}`);
  return Number(match[1]) * (match[2] === 'm' ? 60 : 1);
}

describe('alert rules on a real Prometheus scraping real agents', () => {
  const cluster = withCluster(3);
  const agents: RunningAgent[] = [];
  let prometheus: TestPrometheus | undefined;

  beforeAll(async () => {
    for (const name of NAMES) agents.push(await startMemberAgent(cluster(), name));
    prometheus = await TestPrometheus.start({
      targets: agents.map((a) => new URL(a.listening.url).host),
      labels: { namespace: 'itest' },
      ruleFiles: [RULES],
      scrapeIntervalSeconds: SCRAPE_S,
      evaluationIntervalSeconds: EVAL_S,
    });
  }, patience(60_000));

  afterAll(async () => {
    await prometheus?.stop();
    await Promise.all(agents.map((a) => a.stop(2000)));
  });

  const quorumLost = async (): Promise<ActiveAlert | undefined> =>
    (await prometheus!.alerts()).find((a) => a.labels.alertname === 'EtcdQuorumLost');

  it(
    'when two of three members are killed, then EtcdQuorumLost fires after its for, and resolves once they are back',
    async () => {
      const p = prometheus!;
      const forS = forSeconds('EtcdQuorumLost');
      // Every agent scraped and seeing quorum, and no alert about it.
      await eventually(
        async () => {
          const seen = await p.query('etcd_agent_quorum_has_quorum{job="etcd-lifecycle-agent",namespace="itest"} == 1');
          if (seen.length !== 3) throw new Error(`${seen.length} agents scraped with quorum: ${p.logTail()}`);
        },
        { within: 30_000, every: 250 },
      );
      expect(await quorumLost()).toBeUndefined();

      const killed = Date.now();
      await Promise.all([cluster().kill('etcd-1'), cluster().kill('etcd-2')]);
      const down = Date.now();
      let pendingAt: number | undefined;
      const firing = await eventually(
        async () => {
          const alert = await quorumLost();
          if (alert?.state === 'pending') pendingAt ??= Date.now();
          if (alert?.state !== 'firing')
            throw new Error(`EtcdQuorumLost is ${alert?.state ?? 'inactive'} ${(Date.now() - killed) / 1000} s after the kill`);
          return alert;
        },
        { within: (forS + 30) * 1000, every: 200 },
      );
      // Prometheus' own times: when each agent's scrape first showed quorum lost, when the alert went
      // pending (activeAt) and when it first fired (the first sample of its ALERTS series).
      // A sample carries its scrape's start time but is visible to rules only once the scrape has
      // ended: scrape_duration_seconds of the same scrape says when.
      const durations = await p.range('scrape_duration_seconds', 120);
      const hasQuorum = await p.range('etcd_agent_quorum_has_quorum', 120);
      const firstLost = hasQuorum.map((series) => {
        const at = series.values.findIndex(([t, v]) => t * 1000 >= killed && v === '0');
        if (at < 0) throw new Error(`${series.metric.instance} never showed quorum lost`);
        const first = series.values[at];
        const took = durations.find((d) => d.metric.instance === series.metric.instance)?.values.find(([t]) => t === first[0]);
        if (took === undefined) throw new Error(`no scrape_duration_seconds for ${series.metric.instance} at ${first[0]}`);
        // The next scrape of the same agent starts only once this one's samples are stored.
        const next = series.values[at + 1];
        if (next === undefined) throw new Error(`no scrape of ${series.metric.instance} after ${first[0]}`);
        return {
          instance: series.metric.instance,
          ms: first[0] * 1000 - killed,
          visibleMs: (first[0] + Number(took[1])) * 1000 - killed,
          storedByMs: next[0] * 1000 - killed,
        };
      });
      // A scrape that fails (up == 0) marks its agent's series stale: from then on the rule's `max by`
      // leaves that agent out, so it no longer holds the alert back with its last sample before the kill.
      const up = await p.range('up', 120);
      const failedMs = (instance: string): number[] =>
        (up.find((u) => u.metric.instance === instance)?.values ?? [])
          .filter(([t, v]) => t * 1000 >= killed && v === '0')
          .map(([t]) => t * 1000 - killed);
      const gone = firstLost.map((f) => ({ ...f, failedMs: failedMs(f.instance) }));
      const pendingMs = Date.parse(firing.activeAt) - killed;
      const fired = await p.range('ALERTS{alertname="EtcdQuorumLost",alertstate="firing"}', 120);
      expect(fired).toHaveLength(1);
      const firingMs = fired[0].values[0][0] * 1000 - killed;
      process.stdout.write(
        `EtcdQuorumLost after the kill: scrapes show it lost at ${gone.map((f) => `${f.ms} ms (visible ${Math.round(f.visibleMs)} ms${f.failedMs.length > 0 ? `, scrapes failed at ${f.failedMs.join(', ')} ms` : ''})`).join(', ')}; ` +
          `pending at ${pendingMs} ms (first seen pending by our polls ${pendingAt === undefined ? '-' : pendingAt - killed} ms); ` +
          `firing at ${firingMs} ms (for: ${forS} s)\n`,
      );

      expect(firing.labels).toMatchObject({ namespace: 'itest', job: 'etcd-lifecycle-agent', severity: 'critical' });
      // Every agent's scrape shows the loss once no observation it may serve began before it: a scrape
      // that started the max age (1 s) after the members were down shows no quorum, whatever the
      // scrape's timing (Prometheus' timestamps against the kill, one clock).
      expect(firstLost).toHaveLength(3);
      const stale = hasQuorum.flatMap((series) =>
        series.values
          .filter(([t, v]) => t * 1000 >= down + MAX_AGE_S * 1000 && v !== '0')
          .map(([t, v]) => `${series.metric.instance} ${t} ${v}`),
      );
      expect(stale).toEqual([]);
      // Pending at an evaluation once every agent's last scrape shows it or failed (max by over the
      // agents still seen): not before each of them was so scraped, and not after the first
      // evaluation once each loss sample was surely stored (the agent's next scrape had begun).
      expect(pendingMs).toBeGreaterThanOrEqual(Math.max(...gone.map((f) => Math.min(f.ms, ...f.failedMs))));
      expect(pendingMs).toBeLessThanOrEqual(Math.max(...firstLost.map((f) => f.storedByMs)) + EVAL_S * 1000);
      // Firing once `for` has passed since then, at the next evaluation at the latest.
      expect(firingMs - pendingMs).toBeGreaterThanOrEqual(forS * 1000);
      expect(firingMs - pendingMs).toBeLessThanOrEqual((forS + EVAL_S) * 1000);
      const lost = await p.query('etcd_agent_cluster_status{status="unavailable"} == 1');
      expect(lost.length).toBe(3); // every agent, the two beside killed members too, tells it

      await Promise.all(['etcd-1', 'etcd-2'].map((n) => cluster().restart(n)));
      const back = Date.now();
      await eventually(
        async () => {
          const alert = await quorumLost();
          if (alert !== undefined)
            throw new Error(`EtcdQuorumLost still ${alert.state} ${(Date.now() - back) / 1000} s after the members are back`);
        },
        { within: 15_000, every: 200 },
      );
      process.stdout.write(`EtcdQuorumLost resolved ${(Date.now() - back) / 1000} s after the members were healthy again\n`);
      // The alert resolves once one agent sees quorum again; every agent's next scrapes show it too.
      await eventually(
        async () => {
          const seen = await p.query('etcd_agent_quorum_has_quorum == 1');
          if (seen.length !== 3) throw new Error(`${seen.length} agents scraped with quorum back`);
        },
        { within: 15_000, every: 200 },
      );
    },
    patience(120_000),
  );
});
