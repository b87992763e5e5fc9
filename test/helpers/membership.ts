/**
 * Helpers of the membership integration tests: an in-process agent bound to a
 * local etcd cluster, calls to its v1 routes, and the counters that prove
 * which membership RPCs were (not) sent.
 */
import { RunningAgent, startAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { createLogger, type Logger } from '../../agent/observability/logger';
import { createMetrics, Metrics } from '../../agent/observability/metrics';
import type { LocalEtcdCluster } from './etcd-cluster';
import { eventually } from './eventually';
import { Answer, call } from './http-call';

/** Starts an agent in this process on a free port, with a silent logger and its own metrics. */
export async function startMemberAgent(
  cluster: LocalEtcdCluster,
  memberName: string,
  env: Record<string, string> = {},
  logger?: Logger,
): Promise<RunningAgent> {
  const own = cluster.members.find((m) => m.name === memberName);
  const { config } = loadConfig({
    ETCD_AGENT_LISTEN: '127.0.0.1:0',
    ETCD_AGENT_ENDPOINTS: cluster.clientURLs().join(','),
    ETCD_AGENT_LOCAL_ENDPOINT: own?.clientURL ?? 'http://127.0.0.1:1',
    ETCD_AGENT_MEMBER_NAME: memberName,
    ETCD_AGENT_KEY_PREFIX: '/etcd-lifecycle-agent/',
    ...env,
  });
  // MEMBERSHIP_TEST_LOG=debug shows the agent's own log lines, to see why a test failed.
  const level = process.env.MEMBERSHIP_TEST_LOG;
  const quiet = level === undefined ? createLogger({ silent: true }) : createLogger({ level, stream: process.stderr });
  return startAgent(config, { logger: logger ?? quiet, metrics: createMetrics({ defaultMetrics: false }) });
}

/** POSTs `body` as JSON to `path` of `agent` (loopback, so no token is needed). */
export function post(agent: RunningAgent | string, path: string, body: object, timeoutMs = 70_000): Promise<Answer> {
  return call(typeof agent === 'string' ? agent : agent.listening.url, { method: 'POST', path, body, timeoutMs });
}

/** GETs `path` of `agent`. */
export function get(agent: RunningAgent | string, path: string): Promise<Answer> {
  return call(typeof agent === 'string' ? agent : agent.listening.url, { method: 'GET', path });
}

/** `etcd_agent_membership_changes_total` by kind (add, remove, promote, move-leader): RPCs actually sent. */
export async function changesSent(metrics: Metrics): Promise<Record<string, number>> {
  const counts: Record<string, number> = { add: 0, remove: 0, promote: 0, 'move-leader': 0 };
  for (const v of (await metrics.membershipChanges.get()).values) counts[String(v.labels.kind)] += v.value;
  return counts;
}

/** `etcd_agent_actions_total{action,outcome}` as "action outcome" → count. */
export async function actionsAnswered(metrics: Metrics): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const v of (await metrics.actionsTotal.get()).values) counts[`${v.labels.action} ${v.labels.outcome}`] = v.value;
  return counts;
}

/** The hex id of the current leader, as the member list and one member's status say (via etcdctl). */
export async function leaderOf(cluster: LocalEtcdCluster): Promise<{ id: string; name: string; clientURL: string }> {
  const out = await cluster.etcdctl(['endpoint', 'status', '-w', 'json']);
  const statuses = JSON.parse(out.replace(/"(leader|member_id|cluster_id|ID)":(\d+)/g, '"$1":"$2"')) as Array<{
    Endpoint: string;
    Status: { leader: string; header: { member_id: string } };
  }>;
  const leaderId = BigInt(statuses[0].Status.leader).toString(16);
  const members = await cluster.listMembers();
  const leader = members.find((m) => m.id === leaderId);
  if (leader === undefined) throw new Error(`leader ${leaderId} is not in the member list`);
  return { id: leader.id, name: leader.name, clientURL: leader.clientURLs[0] };
}

/**
 * Resolves once etcd accepts a membership change: a learner on a reserved peer URL (never started)
 * is added, then removed. etcd's strict reconfiguration check (the default) refuses changes as
 * "unhealthy cluster" until its peers have been connected for 5 s (etcdserver's HealthInterval,
 * docs/api.md §4), counted from moments only etcd knows; this waits for etcd to say so instead of
 * waiting out a time. A learner add is refused on the strictest rule (every voter connected), so a
 * change the test makes next is not refused for the guard either. `within` is a patience.
 */
export async function etcdAcceptsChanges(cluster: LocalEtcdCluster, within = 30_000): Promise<void> {
  const peerURL = await cluster.reservePeerURL(`accepts-changes-${++probes}`);
  const id = await eventually(
    async () => {
      // An add applied whose answer was lost is found in the list, not added twice.
      const applied = (await cluster.listMembers()).find((m) => m.peerURLs.includes(peerURL));
      if (applied !== undefined) return applied.id;
      const out = await cluster.etcdctl([
        'member',
        'add',
        `accepts-changes-${probes}`,
        '--learner',
        `--peer-urls=${peerURL}`,
        '-w',
        'json',
      ]);
      const decimal = /"member":\{"ID":(\d+)/.exec(out)?.[1];
      if (decimal === undefined) throw new Error(`no member id in etcdctl member add's answer: ${out.slice(0, 300)}`);
      return BigInt(decimal).toString(16);
    },
    { within, every: 250 },
  );
  // A learner's removal is not guarded: it is refused only when etcd has no leader, which a retry outlasts.
  await eventually(() => cluster.etcdctl(['member', 'remove', id]), { within: 10_000, every: 250 });
}
let probes = 0;

/**
 * Asks `ask` every 100 ms until its answer is `ok` (within `timeoutMs` of patience, which
 * TEST_TIME_SCALE lengthens: helpers/eventually.ts); the last answer it got names why not.
 */
export function until(ask: () => Promise<Answer>, ok: (a: Answer) => boolean, timeoutMs = 10_000): Promise<Answer> {
  return eventually(
    async () => {
      const answer = await ask();
      if (!ok(answer)) throw new Error(`not yet: ${answer.status} ${answer.text.slice(0, 600)}`);
      return answer;
    },
    { within: timeoutMs, every: 100 },
  );
}
