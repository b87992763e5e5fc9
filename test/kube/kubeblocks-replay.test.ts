/**
 * Seed 000's trigger on KubeBlocks v1.0.2's own controller: the scale-out whose first memberJoin
 * fails after it did its work. The new pod's agent gets the call and joins the member, but its
 * answer never reaches kbagent (its replies on the pod's loopback are dropped, the handshake
 * aside), so kbagent reports a timed-out action, the controller does not record the member as
 * joined, and calls memberJoin again. Once the replay has reached the agent too, its replies flow
 * again: the replay is answered from what etcd already has, and the Cluster ends Running with four
 * voters, the OpsRequest Succeed, and every acknowledged write there.
 */
import { mustKubectl } from './helpers/commands';
import { eventually } from '../helpers/eventually';
import { freePVs, waitForMembers } from './helpers/kit';
import { AgentLogs, ClusterWatch, clusterManifest, inPodNetwork, installKubeBlocks, kbPodNames, opsManifest } from './helpers/kubeblocks';
import { kubeStory } from './helpers/story';

const CLUSTER = 'etcd';
const COMPONENT = `${CLUSTER}-etcd`;
const names = (n: number): string[] => kbPodNames(CLUSTER, n);
/** kbagent is KubeBlocks' container in every pod: its probes are KubeBlocks'. */
const KB = { othersContainers: ['kbagent'] };
/** The agent's replies on loopback, all but the handshake's SYN-ACK: the request arrives, its answer does not. */
const DROP_REPLIES = ['OUTPUT', '-o', 'lo', '-p', 'tcp', '--sport', '3501', '!', '--tcp-flags', 'SYN,ACK', 'SYN,ACK', '-j', 'DROP'];

beforeAll(async () => {
  await installKubeBlocks();
}, 600_000);

kubeStory(
  "when the first memberJoin of a scale-out joins the member but its answer is lost, then KubeBlocks v1.0.2 calls again, the agent answers the replay from etcd's member list, and the Cluster ends Running with 4 voters",
  'kb-replay',
  async (s) => {
    await freePVs();
    const watch = new ClusterWatch(s.api, s.namespace);
    const logs = new AgentLogs(s.pods, s.namespace).start();
    s.evidence.set('kubeblocks', () => watch.records);
    s.evidence.set('agentLogs', () => logs.lines);
    try {
      s.step('create the Cluster (3, etcd 3.6.16)');
      await mustKubectl(['apply', '-f', '-'], { input: clusterManifest(CLUSTER, s.namespace, 3, '3.6.16') });
      await waitForMembers(s, names(3), KB);
      s.writer.start();
      await s.moreWrites();

      s.step('OpsRequest scale-out (HorizontalScaling 3 → 4)');
      const started = Date.now();
      await mustKubectl(['apply', '-f', '-'], {
        input: opsManifest('scale-out', s.namespace, CLUSTER, 'HorizontalScaling', {
          horizontalScaling: [{ componentName: 'etcd', scaleOut: { replicaChanges: 1 } }],
        }),
      });
      // As soon as the new pod has its network (its init container, prepare, runs before kbagent
      // and the agent start), the agent's replies on its loopback are dropped.
      const newcomer = names(4)[3];
      const uid = await eventually(
        async () => {
          const pod = s.pods.pod(newcomer);
          if (pod?.podIP === undefined) throw new Error(`${newcomer} has no IP yet`);
          await inPodNetwork(pod.uid, ['iptables', '-w', '-I', ...DROP_REPLIES]);
          return pod.uid;
        },
        { within: 120_000, every: 100 },
      );
      s.step(`the agent's replies on ${newcomer}'s loopback are dropped`);
      expect(logs.requests('POST', '/v1/members/join').filter((l) => l.podUid === uid)).toEqual([]);
      // TCP resends a dropped answer: the drop lasts until kbagent gave up on the first call (its
      // action's 10 s) and the controller's replay has reached the agent too.
      await eventually(
        () => {
          const got = logs.requests('POST', '/v1/members/join').filter((l) => l.podUid === uid);
          if (got.length < 2) throw new Error(`${got.length} memberJoin calls have reached ${newcomer}'s agent, waiting for the replay`);
        },
        { within: 180_000, every: 200 },
      );
      await inPodNetwork(uid, ['iptables', '-w', '-D', ...DROP_REPLIES]);
      s.step('the first memberJoin and its replay reached the agent; its answers flow again');

      const ops = await eventually(
        () => {
          const p = watch.latest('OpsRequest', 'scale-out')?.phase;
          if (p === 'Succeed' || p === 'Failed' || p === 'Aborted') return p;
          throw new Error(`OpsRequest scale-out is ${p ?? 'not seen yet'}`);
        },
        { within: 300_000, every: 500 },
      );
      expect(ops).toBe('Succeed');
      await waitForMembers(s, names(4), KB);
      await eventually(
        () => {
          const cluster = watch.latest('Cluster', CLUSTER)?.phase;
          const component = watch.latest('Component', COMPONENT);
          if (cluster !== 'Running' || component?.available !== 'True')
            throw new Error(`Cluster ${cluster ?? '?'}, Component Available ${component?.available ?? '?'}`);
        },
        { within: 300_000, every: 500 },
      );

      // More than one memberJoin reached the agent, the last answered 200; across every agent, the
      // member was promoted once and never added again (its prepare added it as a learner).
      const joins = logs.requests('POST', '/v1/members/join').filter((l) => l.podUid === uid);
      expect(joins.length).toBeGreaterThan(1);
      expect(joins.at(-1)?.line.status).toBe(200);
      const changes = logs.lines.filter(
        (l) => l.line.message === 'membership change' && (l.line.member as { name?: string } | undefined)?.name === newcomer,
      );
      expect(changes.map((c) => c.line.what)).toEqual(['promote']);
      // etcd has the member once, a voter, beside the three it had: nothing was added twice.
      const last = [...s.etcd.records].reverse().find((r) => r.members !== undefined && r.at > started);
      expect((last?.members ?? []).map((m) => `${m.name}${m.isLearner ? ' (learner)' : ''}`).sort()).toEqual(names(4));
      s.step(`${joins.length} memberJoin calls reached ${newcomer}'s agent: ${joins.map((j) => String(j.line.status)).join(', ')}`);
      await s.moreWrites();
      await s.finishWrites();
    } finally {
      watch.stop();
      logs.stop();
    }
  },
  { podSecurity: 'baseline', clientService: `${COMPONENT}-client`, owners: 'clusters.apps.kubeblocks.io' },
);
