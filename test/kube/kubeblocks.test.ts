/**
 * KubeBlocks' own controller in front of the agent: KubeBlocks v1.0.2's manager, built from the Go
 * module proxy, runs against the one-node cluster (scripts/kube.sh kubeblocks), and
 * deploy/kubeblocks-componentdefinition.yaml, its ComponentVersion and the defragmentation's
 * OpsDefinition are installed as they are. One Cluster goes through what a user does to it, each
 * step only through KubeBlocks' API (the Cluster, OpsRequests), under a writer whose every
 * acknowledged write is read back at the end:
 *   create 3 → scale out 3→4 → switchover to the new member → scale in 4→3 (the leader leaves) →
 *   switchover with no candidate → defragmentation (Custom OpsRequest) → rolling restart →
 *   two of three etcd stopped and started again.
 * Each step is judged from records: the Cluster's and Component's phases and conditions, etcd's own
 * status and member list from every pod, the pods, and every agent's request log.
 */
import { plainClient } from './helpers/writer';
import { mustKubectl } from './helpers/commands';
import { eventually } from '../helpers/eventually';
import { overlapping, podDownIntervals } from './helpers/judge';
import { freePVs, waitForMembers } from './helpers/kit';
import { AgentLogs, ClusterWatch, clusterManifest, etcdPid, installKubeBlocks, kbPodNames, opsManifest } from './helpers/kubeblocks';
import type { EtcdRecord } from './helpers/observe';
import { kubeStory, type Story } from './helpers/story';

const CLUSTER = 'etcd';
const COMPONENT = `${CLUSTER}-etcd`;
const names = (n: number): string[] => kbPodNames(CLUSTER, n);
/** kbagent is KubeBlocks' container in every pod: its probes are KubeBlocks'. */
const KB = { othersContainers: ['kbagent'] };

beforeAll(async () => {
  await installKubeBlocks();
}, 600_000);

/** Applies an OpsRequest and waits until it Succeeds; one that fails or is aborted fails the story at once. */
async function runOps(
  s: Story,
  watch: ClusterWatch,
  name: string,
  type: string,
  spec: object,
): Promise<{ started: number; ended: number }> {
  const started = Date.now();
  s.step(`OpsRequest ${name} (${type})`);
  await mustKubectl(['apply', '-f', '-'], { input: opsManifest(name, s.namespace, CLUSTER, type, spec) });
  const phase = await eventually(
    () => {
      const p = watch.latest('OpsRequest', name)?.phase;
      if (p === 'Succeed' || p === 'Failed' || p === 'Aborted' || p === 'Cancelled') return p;
      throw new Error(`OpsRequest ${name} is ${p ?? 'not seen yet'}`);
    },
    { within: 300_000, every: 500 },
  );
  expect({ ops: name, phase }).toEqual({ ops: name, phase: 'Succeed' });
  s.step(`OpsRequest ${name} Succeed`);
  return { started, ended: Date.now() };
}

/** Waits until the Cluster is Running and the Component Available. */
async function runningAndAvailable(watch: ClusterWatch): Promise<number> {
  return eventually(
    () => {
      const cluster = watch.latest('Cluster', CLUSTER)?.phase;
      const component = watch.latest('Component', COMPONENT);
      if (cluster !== 'Running' || component?.phase !== 'Running' || component.available !== 'True')
        throw new Error(`Cluster ${cluster ?? '?'}, Component ${component?.phase ?? '?'} (Available ${component?.available ?? '?'})`);
      return Date.now();
    },
    { within: 300_000, every: 500 },
  );
}

/**
 * Running stays so: from `since`, until every pod's agent has answered `probes` more availableProbe
 * calls (each is kbagent's, every 5 s: 8 of them outlast KubeBlocks' 30 s window of reports), no
 * Cluster phase but Running and no Component availability but True was recorded.
 */
async function staysRunning(s: Story, watch: ClusterWatch, logs: AgentLogs, pods: string[], probes = 8): Promise<void> {
  const since = Date.now();
  const probed = (pod: string): number =>
    logs.requests('GET', '/v1/available').filter((l) => l.pod === pod && Date.parse(String(l.line.timestamp)) >= since).length;
  await eventually(
    () => {
      const short = pods.filter((p) => probed(p) < probes).map((p) => `${p}: ${probed(p)}`);
      if (short.length > 0) throw new Error(`waiting for ${probes} availableProbe calls per pod: ${short.join(', ')}`);
    },
    { within: 180_000, every: 1000 },
  );
  expect(watch.since('Cluster', CLUSTER, since).filter((r) => r.phase !== 'Running')).toEqual([]);
  expect(watch.since('Component', COMPONENT, since).filter((r) => r.phase !== 'Running' || r.available !== 'True')).toEqual([]);
  s.step(`Running and Available while each pod answered ${probes} availableProbe calls`);
}

/** etcd's leader as every answering pod sees it now: the pod name whose member id they all name. */
async function leaderNow(s: Story, pods: string[]): Promise<string> {
  return eventually(
    () => {
      const recent = pods.map((p) =>
        [...s.etcd.records].reverse().find((r) => r.pod === p && r.leader !== undefined && r.at > Date.now() - 2000),
      );
      const leaders = new Set(recent.map((r) => r?.leader));
      if (recent.some((r) => r === undefined) || leaders.size !== 1) throw new Error(`no single leader yet: ${[...leaders].join(', ')}`);
      const leader = recent.find((r) => r?.memberId === [...leaders][0]);
      if (leader === undefined) throw new Error(`the leader ${[...leaders][0]} is none of ${pods.join(', ')}`);
      return leader.pod;
    },
    { within: 60_000, every: 300 },
  );
}

/** Waits until the pods carry KubeBlocks' role labels as etcd says: `leader` on `leader`, `follower` on the others. */
async function rolesFollow(s: Story, pods: string[], leader: string): Promise<void> {
  await eventually(
    async () => {
      const labels = await Promise.all(
        pods.map(async (p) => [
          p,
          await mustKubectl(['get', 'pod', p, '-n', s.namespace, '-o', 'jsonpath={.metadata.labels.kubeblocks\\.io/role}']),
        ]),
      );
      expect(Object.fromEntries(labels)).toEqual(Object.fromEntries(pods.map((p) => [p, p === leader ? 'leader' : 'follower'])));
    },
    { within: 120_000, every: 1000 },
  );
}

/** The member list the newest answering record gives, by name, learners marked. */
function membersNow(records: EtcdRecord[]): string[] {
  const last = [...records].reverse().find((r) => r.members !== undefined);
  return (last?.members ?? []).map((m) => `${m.name}${m.isLearner ? ' (learner)' : ''}`).sort();
}

/** Puts `count` values of `size` bytes under `prefix` through the client Service, then deletes them: free pages for a defragmentation. */
async function fragment(s: Story, prefix: string, count: number, size: number): Promise<void> {
  const client = plainClient([await s.clientURL()]);
  try {
    const value = Buffer.alloc(size, 'x');
    for (let i = 0; i < count; i++) await client.put(`${prefix}${i}`).value(value);
    await client.delete().prefix(prefix);
  } finally {
    client.close();
  }
}

kubeStory(
  "when KubeBlocks v1.0.2's controller creates, scales, switches over, defragments and restarts a Cluster of the definition, and two members stop, then each OpsRequest succeeds, the roles follow etcd, availability follows the quorum, and no acknowledged write is lost",
  'kb-lifecycle',
  async (s) => {
    await freePVs();
    const watch = new ClusterWatch(s.api, s.namespace);
    const logs = new AgentLogs(s.pods, s.namespace).start();
    s.evidence.set('kubeblocks', () => watch.records);
    s.evidence.set('agentLogs', () => logs.lines);
    try {
      // Create: 3 voters, one leader, roles on the pods as etcd has them.
      s.step('create the Cluster (3, etcd 3.6.16)');
      await mustKubectl(['apply', '-f', '-'], { input: clusterManifest(CLUSTER, s.namespace, 3, '3.6.16') });
      await waitForMembers(s, names(3), KB);
      await runningAndAvailable(watch);
      await rolesFollow(s, names(3), await leaderNow(s, names(3)));
      s.writer.start();
      await s.moreWrites();

      // Seed 000, for real: a HorizontalScaling 3 → 4 ends Running with 4 voters, and stays so.
      await runOps(s, watch, 'scale-out', 'HorizontalScaling', {
        horizontalScaling: [{ componentName: 'etcd', scaleOut: { replicaChanges: 1 } }],
      });
      await waitForMembers(s, names(4), KB);
      await runningAndAvailable(watch);
      await staysRunning(s, watch, logs, names(4));
      expect(membersNow(s.etcd.records)).toEqual(names(4));
      const joined = logs.requests('POST', '/v1/members/join').filter((l) => l.pod === names(4)[3]);
      expect(joined.at(-1)?.line.status).toBe(200);

      // Switchover to a candidate: the new member leads, and the labels follow.
      const first = await leaderNow(s, names(4));
      const newcomer = names(4)[3];
      await runOps(s, watch, 'switchover-to-newcomer', 'Switchover', {
        switchover: [{ componentName: 'etcd', instanceName: first, candidateName: newcomer }],
      });
      expect(await leaderNow(s, names(4))).toBe(newcomer);
      await rolesFollow(s, names(4), newcomer);

      // Scale in 4 → 3: the member that leaves leads; leadership moves first, then it is removed.
      const scaleIn = await runOps(s, watch, 'scale-in', 'HorizontalScaling', {
        horizontalScaling: [{ componentName: 'etcd', scaleIn: { replicaChanges: 1 } }],
      });
      await waitForMembers(s, names(3), KB);
      await runningAndAvailable(watch);
      const leavingId = s.etcd.records.find((r) => r.pod === newcomer && r.memberId !== undefined)?.memberId;
      const movedAt = s.etcd.records.find(
        (r) => r.at >= scaleIn.started && r.pod !== newcomer && r.leader !== undefined && r.leader !== leavingId,
      )?.at;
      const goneAt = s.etcd.records.find(
        (r) => r.at >= scaleIn.started && r.members !== undefined && !r.members.some((m) => m.id === leavingId),
      )?.at;
      expect({ movedAt: movedAt !== undefined, removedAt: goneAt !== undefined }).toEqual({ movedAt: true, removedAt: true });
      expect(movedAt as number).toBeLessThanOrEqual(goneAt as number);
      const leaving = logs.lines
        .filter((l) => l.pod === newcomer && l.line.message === 'request' && l.line.method === 'POST')
        .map((l) => `${String(l.line.path)} ${String(l.line.status)}`);
      expect(leaving).toEqual(expect.arrayContaining(['/v1/leader/transfer 200', '/v1/members/leave 200']));
      expect(leaving.indexOf('/v1/leader/transfer 200')).toBeLessThan(leaving.lastIndexOf('/v1/members/leave 200'));
      expect(membersNow(s.etcd.records)).toEqual(names(3));

      // Switchover with no candidate: leadership moves to another member, the labels follow.
      const before = await leaderNow(s, names(3));
      await runOps(s, watch, 'switchover', 'Switchover', { switchover: [{ componentName: 'etcd', instanceName: before }] });
      const after = await leaderNow(s, names(3));
      expect(after).not.toBe(before);
      await rolesFollow(s, names(3), after);

      // Defragmentation through the OpsDefinition: every member's file shrinks, the leader's last,
      // after leadership moved away from it.
      s.step('fragment: 220 values of 512 KiB written and deleted');
      await fragment(s, '/kube-story/fragment/', 220, 512 * 1024);
      const leaderBefore = await leaderNow(s, names(3));
      // Every member's file holds them (at least the agent's 100 MiB threshold), deleted or not.
      const sizes = await eventually(
        () => {
          const now = new Map(
            names(3).map((p) => [p, [...s.etcd.records].reverse().find((r) => r.pod === p && r.dbSize !== undefined)?.dbSize ?? 0]),
          );
          const small = [...now].filter(([, size]) => size < 100 * 1024 * 1024);
          if (small.length > 0) throw new Error(`files under 100 MiB: ${small.map(([p, size]) => `${p} ${size}`).join(', ')}`);
          return now;
        },
        { within: 60_000, every: 500 },
      );
      const defrag = await runOps(s, watch, 'defragment', 'Custom', {
        custom: {
          opsDefinitionName: 'etcd-lifecycle-agent-defragment',
          components: [{ componentName: 'etcd', parameters: [{ name: 'compactRetain', value: '1' }] }],
        },
      });
      const shrunk = new Map(
        names(3).map((p) => [
          p,
          s.etcd.records.find(
            (r) => r.pod === p && r.at >= defrag.started && r.dbSize !== undefined && r.dbSize < (sizes.get(p) as number) / 2,
          )?.at,
        ]),
      );
      expect([...shrunk].filter(([, at]) => at === undefined)).toEqual([]);
      const leaderShrunk = shrunk.get(leaderBefore) as number;
      expect([...shrunk].filter(([p, at]) => p !== leaderBefore && (at as number) > leaderShrunk)).toEqual([]);
      const leaderIdBefore = s.etcd.records.find((r) => r.pod === leaderBefore && r.memberId !== undefined)?.memberId;
      expect(
        s.etcd.records.some((r) => r.at >= defrag.started && r.at <= leaderShrunk && r.leader !== undefined && r.leader !== leaderIdBefore),
      ).toBe(true);

      // A rolling restart: every pod replaced, one at a time, Running again.
      const uids = new Map(names(3).map((p) => [p, s.pods.pod(p)?.uid]));
      const restart = await runOps(s, watch, 'restart', 'Restart', { restart: [{ componentName: 'etcd' }] });
      await waitForMembers(s, names(3), KB);
      await runningAndAvailable(watch);
      expect(names(3).filter((p) => s.pods.pod(p)?.uid === uids.get(p))).toEqual([]);
      const down = podDownIntervals(
        s.pods.records.filter((r) => r.at >= restart.started),
        Date.now(),
      );
      expect(overlapping(down)).toEqual([]);

      // Two of three etcd stopped: the Component turns unavailable; started again, available.
      const stopped = names(3).slice(1);
      const pids = stopped.map((p) => etcdPid(s.pods.pod(p)?.uid as string));
      s.step(`SIGSTOP etcd of ${stopped.join(', ')}`);
      const stoppedAt = Date.now();
      for (const pid of pids) process.kill(pid, 'SIGSTOP');
      try {
        await eventually(
          () => {
            const c = watch.since('Component', COMPONENT, stoppedAt).find((r) => r.available === 'False');
            if (c === undefined) throw new Error(`the Component is still ${watch.latest('Component', COMPONENT)?.available ?? '?'}`);
          },
          { within: 120_000, every: 500 },
        );
        s.step('the Component turned unavailable');
      } finally {
        for (const pid of pids) process.kill(pid, 'SIGCONT');
      }
      s.step(`SIGCONT etcd of ${stopped.join(', ')}`);
      const resumed = Date.now();
      await eventually(
        () => {
          if (!watch.since('Component', COMPONENT, resumed).some((r) => r.available === 'True'))
            throw new Error(`the Component is still ${watch.latest('Component', COMPONENT)?.available ?? '?'}`);
        },
        { within: 120_000, every: 500 },
      );
      await runningAndAvailable(watch);
      await s.moreWrites();
      await s.finishWrites();
    } finally {
      watch.stop();
      logs.stop();
    }
  },
  { podSecurity: 'baseline', clientService: `${COMPONENT}-client`, owners: 'clusters.apps.kubeblocks.io' },
);
