/**
 * Rolling restart: `kubectl rollout restart` of the StatefulSet, with the kit's PodDisruptionBudget
 * in place, under a writer. The records judge it (helpers/judge.ts):
 * - never two members down: no two pods' stretches from "seen going" (deleted, or not Ready after
 *   being Ready) to "replacement seen Ready" overlap, nor two members' stretches of failed etcd
 *   status answers;
 * - never `healthy` while one is down: no `healthy` answer of any agent whose observation started
 *   (`observedAt`) while a member was failing its status calls and came back before that stopped;
 * - every acknowledged write is there;
 * - a stop that was asked for is no error: each replaced pod's containers exit 0.
 * Each pod is replaced once (a new uid).
 */
import { mustKubectl } from './helpers/commands';
import { healthyWhileGoing, healthyWhileSilent, overlapping, podDownIntervals, silentIntervals } from './helpers/judge';
import { installKit, podNames, waitForMembers } from './helpers/kit';
import { kubeStory } from './helpers/story';
import { eventually } from '../helpers/eventually';

kubeStory(
  'when the StatefulSet is restarted with kubectl rollout restart under the PodDisruptionBudget, then never two members are down, no agent says healthy while one is down, and no acknowledged write is lost',
  'rolling-restart',
  async (s) => {
    await installKit(s, '3.6');
    const pdb = await s.api.get(`/apis/policy/v1/namespaces/${s.namespace}/poddisruptionbudgets/etcd`);
    expect(pdb.spec.maxUnavailable).toBe(1);
    s.writer.start();
    await s.moreWrites();
    const before = new Map(podNames(3).map((n) => [n, s.pods.pod(n)!.uid]));

    const restarted = Date.now();
    s.step('kubectl rollout restart');
    await mustKubectl(['rollout', 'restart', 'statefulset/etcd', '-n', s.namespace]);
    await eventually(
      () => {
        const same = podNames(3).filter((n) => s.pods.pod(n)?.uid === before.get(n));
        if (same.length > 0) throw new Error(`not replaced yet: ${same.join(', ')}`);
      },
      { within: 600_000, every: 500 },
    );
    await waitForMembers(s, podNames(3));
    await s.moreWrites();
    const writes = await s.finishWrites();
    const ended = Date.now();

    const going = podDownIntervals(
      s.pods.records.filter((r) => r.at >= restarted),
      ended,
    );
    expect(going.map((g) => g.name).sort()).toEqual(podNames(3));
    expect(overlapping(going)).toEqual([]);
    const silent = silentIntervals(s.etcd.records, s.pods.records, restarted);
    expect(overlapping(silent)).toEqual([]);
    expect(healthyWhileSilent(s.health.records, silent)).toEqual([]);
    expect(writes.filter((w) => w.acknowledged && w.sentAt > restarted).length).toBeGreaterThan(0);
    // A stop that was asked for is not an error: each replaced pod's containers ended with exit 0.
    const ends = [...before].map(([name, uid]) => {
      const last = s.pods.records.filter((r) => r.uid === uid).pop()!;
      return { name, exits: Object.fromEntries(Object.entries(last.containers).map(([c, st]) => [c, st.terminated?.exitCode])) };
    });
    expect(ends).toEqual(podNames(3).map((name) => ({ name, exits: { etcd: 0, 'etcd-lifecycle-agent': 0 } })));

    // Not a verdict: how long `healthy` was still said of a member whose pod was terminating while
    // its etcd still answered, for the story's log.
    const late = healthyWhileGoing(s.health.records, going, silent);
    process.stderr.write(
      `rolling restart: healthy answers after a pod was seen going: ${late.map((l) => `${l.going.name} ${l.lateMs} ms (${l.answers})`).join(', ') || 'none'}\n`,
    );
  },
);
