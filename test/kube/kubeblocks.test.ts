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
import { eventually } from '../helpers/eventually';
import { overlapping, podDownIntervals } from './helpers/judge';
import { etcdPid } from './helpers/kubeblocks';
import { kubeBlocksStory } from './helpers/kubeblocks-story';
import type { Story } from './helpers/story';
import { plainClient } from './helpers/writer';

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

kubeBlocksStory(
  "when KubeBlocks v1.0.2's controller creates, scales, switches over, defragments and restarts a Cluster of the definition, and two members stop, then each OpsRequest succeeds, the roles follow etcd, availability follows the quorum, and no acknowledged write is lost",
  'kb-lifecycle',
  async (kb, s) => {
    // Create: 3 voters, one leader, roles on the pods as etcd has them.
    await kb.create(3, '3.6.16');
    await kb.rolesFollow(kb.names(3), await kb.leaderNow(kb.names(3)));
    s.writer.start();
    await s.moreWrites();

    // The incident's scale-out: a HorizontalScaling 3 → 4 ends Running with 4 voters, and stays so.
    await kb.runOps('scale-out', 'HorizontalScaling', { horizontalScaling: [{ componentName: 'etcd', scaleOut: { replicaChanges: 1 } }] });
    await kb.members(4);
    await kb.runningAndAvailable();
    await kb.staysRunning(kb.names(4));
    expect(kb.membersNow()).toEqual(kb.names(4));
    const newcomer = kb.names(4)[3];
    expect(
      kb.logs
        .requests('POST', '/v1/members/join')
        .filter((l) => l.pod === newcomer)
        .at(-1)?.line.status,
    ).toBe(200);

    // Switchover to a candidate: the new member leads, and the labels follow.
    const first = await kb.leaderNow(kb.names(4));
    await kb.runOps('switchover-to-newcomer', 'Switchover', {
      switchover: [{ componentName: 'etcd', instanceName: first, candidateName: newcomer }],
    });
    expect(await kb.leaderNow(kb.names(4))).toBe(newcomer);
    await kb.rolesFollow(kb.names(4), newcomer);

    // Scale in 4 → 3: the member that leaves leads; leadership moves first, then it is removed.
    const scaleIn = await kb.runOps('scale-in', 'HorizontalScaling', {
      horizontalScaling: [{ componentName: 'etcd', scaleIn: { replicaChanges: 1 } }],
    });
    await kb.members(3);
    await kb.runningAndAvailable();
    const leavingId = s.etcd.records.find((r) => r.pod === newcomer && r.memberId !== undefined)?.memberId;
    const movedAt = s.etcd.records.find(
      (r) => r.at >= scaleIn.started && r.pod !== newcomer && r.leader !== undefined && r.leader !== leavingId,
    )?.at;
    const goneAt = s.etcd.records.find(
      (r) => r.at >= scaleIn.started && r.members !== undefined && !r.members.some((m) => m.id === leavingId),
    )?.at;
    expect({ moved: movedAt !== undefined, removed: goneAt !== undefined }).toEqual({ moved: true, removed: true });
    expect(movedAt as number).toBeLessThanOrEqual(goneAt as number);
    const asked = kb.logs.lines
      .filter((l) => l.pod === newcomer && l.line.message === 'request' && l.line.method === 'POST')
      .map((l) => `${String(l.line.path)} ${String(l.line.status)}`);
    expect(asked).toEqual(expect.arrayContaining(['/v1/leader/transfer 200', '/v1/members/leave 200']));
    expect(asked.indexOf('/v1/leader/transfer 200')).toBeLessThan(asked.lastIndexOf('/v1/members/leave 200'));
    expect(kb.membersNow()).toEqual(kb.names(3));

    // Switchover with no candidate: leadership moves to another member, the labels follow.
    const before = await kb.leaderNow(kb.names(3));
    await kb.runOps('switchover', 'Switchover', { switchover: [{ componentName: 'etcd', instanceName: before }] });
    const after = await kb.leaderNow(kb.names(3));
    expect(after).not.toBe(before);
    await kb.rolesFollow(kb.names(3), after);

    // Defragmentation through the OpsDefinition: every member's file shrinks, the leader's last,
    // after leadership moved away from it.
    s.step('fragment: 220 values of 512 KiB written and deleted');
    await fragment(s, '/kube-story/fragment/', 220, 512 * 1024);
    const leaderBefore = await kb.leaderNow(kb.names(3));
    // Every member's file holds them (at least the agent's 100 MiB threshold), deleted or not.
    const sizes = await eventually(
      () => {
        const now = new Map(
          kb.names(3).map((p) => [p, [...s.etcd.records].reverse().find((r) => r.pod === p && r.dbSize !== undefined)?.dbSize ?? 0]),
        );
        const small = [...now].filter(([, size]) => size < 100 * 1024 * 1024);
        if (small.length > 0) throw new Error(`files under 100 MiB: ${small.map(([p, size]) => `${p} ${size}`).join(', ')}`);
        return now;
      },
      { within: 60_000, every: 500 },
    );
    const defrag = await kb.runOps('defragment', 'Custom', {
      custom: {
        opsDefinitionName: 'etcd-lifecycle-agent-defragment',
        components: [{ componentName: 'etcd', parameters: [{ name: 'compactRetain', value: '1' }] }],
      },
    });
    const shrunk = new Map(
      kb
        .names(3)
        .map((p) => [
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
    const uids = new Map(kb.names(3).map((p) => [p, s.pods.pod(p)?.uid]));
    const restart = await kb.runOps('restart', 'Restart', { restart: [{ componentName: 'etcd' }] });
    await kb.members(3);
    await kb.runningAndAvailable();
    expect(kb.names(3).filter((p) => s.pods.pod(p)?.uid === uids.get(p))).toEqual([]);
    expect(
      overlapping(
        podDownIntervals(
          s.pods.records.filter((r) => r.at >= restart.started),
          Date.now(),
        ),
      ),
    ).toEqual([]);

    // Two of three etcd stopped: the Component turns unavailable; started again, available.
    const stopped = kb.names(3).slice(1);
    const pids = stopped.map((p) => etcdPid(s.pods.pod(p)?.uid as string));
    s.step(`SIGSTOP etcd of ${stopped.join(', ')}`);
    const stoppedAt = Date.now();
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    try {
      await eventually(
        () => {
          if (!kb.watch.since('Component', kb.component, stoppedAt).some((r) => r.available === 'False'))
            throw new Error(`the Component is still ${kb.watch.latest('Component', kb.component)?.available ?? '?'}`);
        },
        { within: 120_000, every: 500 },
      );
      s.step('the Component turned unavailable');
      // As the agent of the member still running answered its availableProbe: no quorum (its log
      // line reaches this process a moment after it was written).
      const survivor = kb.names(3)[0];
      await eventually(
        () => {
          const answered = kb.logs
            .requests('GET', '/v1/available')
            .filter((l) => l.pod === survivor && Date.parse(String(l.line.timestamp)) >= stoppedAt);
          expect(answered.map((l) => l.line.status)).toContain(503);
        },
        { within: 30_000, every: 500 },
      );
    } finally {
      for (const pid of pids) process.kill(pid, 'SIGCONT');
    }
    s.step(`SIGCONT etcd of ${stopped.join(', ')}`);
    const resumed = Date.now();
    await eventually(
      () => {
        if (!kb.watch.since('Component', kb.component, resumed).some((r) => r.available === 'True'))
          throw new Error(`the Component is still ${kb.watch.latest('Component', kb.component)?.available ?? '?'}`);
      },
      { within: 120_000, every: 500 },
    );
    await kb.runningAndAvailable();
    await s.moreWrites();
    await s.finishWrites();
  },
);
