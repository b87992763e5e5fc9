/**
 * A permanent quorum loss on a KubeBlocks Cluster, recovered as docs/operations/quorum-loss-recovery.md
 * tells an operator to: two of three members lose their disks for good (their pods and claims
 * deleted, so KubeBlocks gives them new, empty volumes), the leader survives alone. The new pods'
 * prepare finds no quorum and a member with data, and waits: it never bootstraps a second cluster.
 * The operator reads the plan from the survivor's agent and orders the recovery there; the survivor's
 * etcd restarts once with --force-new-cluster (its start program, as in the kit), and the waiting
 * pods join it learner first. The Cluster is Running again with 3 voters and one cluster id all
 * along, and every write acknowledged before the loss is there.
 */
import { eventually } from '../helpers/eventually';
import { clusterIds } from './helpers/judge';
import { kubeBlocksStory } from './helpers/kubeblocks-story';
import { kubectl, mustKubectl, type Ran } from './helpers/commands';

/** The operator's CLI in a pod's agent container, over loopback (the runbook's `agent` function). */
const agent = (namespace: string, pod: string, args: string[]): Promise<Ran> =>
  kubectl(['exec', '-n', namespace, pod, '-c', 'etcd-lifecycle-agent', '--', 'etcd-lifecycle-agent', ...args]);

kubeBlocksStory(
  'when two of three members of a KubeBlocks Cluster lose their disks for good, then no second cluster forms, and the recovery ordered at the survivor brings back 3 voters with every write acknowledged before the loss',
  'kb-recovery',
  async (kb, s) => {
    // The loss must last 20 s before the agent acts (a documented setting, given through the Cluster).
    await kb.create(3, '3.6.16', [{ name: 'ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS', value: '20' }]);
    s.writer.start();
    await s.moreWrites();
    const [clusterIdDecimal] = [...clusterIds(s.etcd.records).keys()];
    // etcd's JSON gateway writes ids in decimal; the agent, as etcdctl does, in hex.
    const clusterId = BigInt(clusterIdDecimal).toString(16);

    // The leader has every committed entry: it survives, the two others lose pod and volume.
    const survivor = await kb.leaderNow(kb.names(3));
    const lost = kb.names(3).filter((p) => p !== survivor);
    const lostUids = new Map(lost.map((p) => [p, s.pods.pod(p)?.uid]));
    s.step(`lose ${lost.join(' and ')}: their claims and pods deleted`);
    const lostAt = Date.now();
    await mustKubectl(['delete', 'pvc', ...lost.map((p) => `data-${p}`), '-n', s.namespace, '--wait=false']);
    await mustKubectl(['delete', 'pod', ...lost, '-n', s.namespace, '--grace-period=0', '--force']);

    // The new pods come, each on a new, empty volume, and wait in prepare: the quorum is gone.
    await eventually(
      () => {
        const back = lost.filter((p) => {
          const pod = s.pods.pod(p);
          return pod !== undefined && pod.uid !== lostUids.get(p) && pod.podIP !== undefined;
        });
        if (back.length < lost.length) throw new Error(`new pods with an IP: ${back.join(', ') || 'none'}`);
      },
      { within: 180_000, every: 500 },
    );

    // The plan, from the survivor's agent, once the loss is long enough: recover from the survivor.
    const plan = await eventually(
      async () => {
        const ran = await agent(s.namespace, survivor, ['recovery', '--summary']);
        if (!/^recovery possible: recover from /m.test(ran.stdout))
          throw new Error(`the plan says: ${ran.stdout.trim() || ran.stderr.trim()}`);
        return ran.stdout;
      },
      { within: 180_000, every: 2000 },
    );
    expect(plan).toContain(`recover from ${survivor}`);
    expect(plan).toContain(`cluster ${clusterId}`);
    s.step(`the plan: ${plan.split('\n')[0]}`);

    // Ordered at the survivor's agent; called again while it is under way (exit 3), as the runbook says.
    const ordered = await eventually(
      async () => {
        const ran = await agent(s.namespace, survivor, ['recover', '--from', survivor, '--cluster-id', clusterId, '--summary']);
        if (ran.code === 3) throw new Error(`in progress: ${ran.stdout.trim()}`);
        return ran;
      },
      { within: 180_000, every: 2000 },
    );
    expect({ code: ordered.code, said: ordered.stdout.split('\n')[0] }).toEqual({ code: 0, said: expect.stringMatching(/recovered/) });
    s.step(`recover: ${ordered.stdout.split('\n')[0]}`);

    // The new pods join the recovered member learner first; 3 voters, Running, Available.
    await kb.members(3);
    await kb.runningAndAvailable();
    // One cluster id in every answer any etcd gave, before, during and after: no second cluster.
    expect([...clusterIds(s.etcd.records).keys()]).toEqual([clusterIdDecimal]);
    // Between the loss and the recovery, no new pod's etcd answered: they waited in prepare.
    const recoveredAt = s.steps.find((st) => st.what.startsWith('recover: '))?.at as number;
    const answeredEarly = s.etcd.records.filter(
      (r) => lost.includes(r.pod) && r.podUid !== lostUids.get(r.pod) && r.at < recoveredAt && r.clusterId !== undefined,
    );
    expect(answeredEarly.map((r) => `${r.pod} ${r.clusterId}`)).toEqual([]);
    expect(recoveredAt).toBeGreaterThan(lostAt);
    await s.moreWrites();
    await s.finishWrites();
  },
);
