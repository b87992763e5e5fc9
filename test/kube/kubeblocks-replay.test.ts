/**
 * The KubeBlocks incident's trigger, on KubeBlocks v1.0.2's own controller: the scale-out whose first memberJoin
 * fails after it did its work. The new pod's agent gets the call and joins the member, but its
 * answer never reaches kbagent (its replies on the pod's loopback are dropped, the handshake
 * aside), so kbagent reports a timed-out action, the controller does not record the member as
 * joined, and calls memberJoin again. Once the replay has reached the agent too, its replies flow
 * again: the replay is answered from what etcd already has, and the Cluster ends Running with four
 * voters, the OpsRequest Succeed, and every acknowledged write there.
 */
import { eventually } from '../helpers/eventually';
import { inPodNetwork, opsManifest } from './helpers/kubeblocks';
import { kubeBlocksStory } from './helpers/kubeblocks-story';
import { mustKubectl } from './helpers/commands';

/** The agent's replies on loopback, all but the handshake's SYN-ACK: the request arrives, its answer does not. */
const DROP_REPLIES = ['OUTPUT', '-o', 'lo', '-p', 'tcp', '--sport', '3501', '!', '--tcp-flags', 'SYN,ACK', 'SYN,ACK', '-j', 'DROP'];

kubeBlocksStory(
  "when the first memberJoin of a scale-out joins the member but its answer is lost, then KubeBlocks v1.0.2 calls again, the agent answers the replay from etcd's member list, and the Cluster ends Running with 4 voters",
  'kb-replay',
  async (kb, s) => {
    await kb.create(3, '3.6.16');
    s.writer.start();
    await s.moreWrites();

    s.step('OpsRequest scale-out (HorizontalScaling 3 → 4)');
    await mustKubectl(['apply', '-f', '-'], {
      input: opsManifest('scale-out', s.namespace, kb.name, 'HorizontalScaling', {
        horizontalScaling: [{ componentName: 'etcd', scaleOut: { replicaChanges: 1 } }],
      }),
    });
    // As soon as the new pod has its network (its init container, prepare, runs before kbagent and
    // the agent start), the agent's replies on its loopback are dropped.
    const newcomer = kb.names(4)[3];
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
    const joinsAt = (): ReturnType<typeof kb.logs.requests> => kb.logs.requests('POST', '/v1/members/join').filter((l) => l.podUid === uid);
    expect(joinsAt()).toEqual([]);
    // TCP resends a dropped answer: the drop lasts until kbagent gave up on the first call (its
    // action's 10 s) and the controller's replay has reached the agent too.
    await eventually(
      () => {
        if (joinsAt().length < 2)
          throw new Error(`${joinsAt().length} memberJoin calls have reached ${newcomer}'s agent, waiting for the replay`);
      },
      { within: 180_000, every: 200 },
    );
    await inPodNetwork(uid, ['iptables', '-w', '-D', ...DROP_REPLIES]);
    s.step('the first memberJoin and its replay reached the agent; its answers flow again');

    const ops = await eventually(
      () => {
        const p = kb.watch.latest('OpsRequest', 'scale-out')?.phase;
        if (p === 'Succeed' || p === 'Failed' || p === 'Aborted') return p;
        throw new Error(`OpsRequest scale-out is ${p ?? 'not seen yet'}`);
      },
      { within: 300_000, every: 500 },
    );
    expect(ops).toBe('Succeed');
    await kb.members(4);
    await kb.runningAndAvailable();

    // More than one memberJoin reached the agent, the last answered 200; across every agent, the
    // member was promoted once and never added again (its prepare added it as a learner).
    const joins = joinsAt();
    expect(joins.length).toBeGreaterThan(1);
    expect(joins.at(-1)?.line.status).toBe(200);
    const changes = kb.logs.lines.filter(
      (l) => l.line.message === 'membership change' && (l.line.member as { name?: string } | undefined)?.name === newcomer,
    );
    expect(changes.map((c) => c.line.what)).toEqual(['promote']);
    // etcd has the member once, a voter, beside the three it had.
    expect(kb.membersNow()).toEqual(kb.names(4));
    s.step(`${joins.length} memberJoin calls reached ${newcomer}'s agent: ${joins.map((j) => String(j.line.status)).join(', ')}`);
    await s.moreWrites();
    await s.finishWrites();
  },
);
