/**
 * Scale out: `kubectl scale sts etcd --replicas=5` under a writer. Each new pod's `prepare` joins
 * its member as a learner and its sidecar promotes it; etcd allows one learner at a time, so the
 * second new pod waits for the first. Every pod's etcd is asked for its status and member list all
 * along: never more than one learner in any list, one cluster id in every answer, five voters at
 * the end, and every acknowledged write there. On etcd 3.6, 3.4 and 3.7.
 */
import { mustKubectl } from './helpers/commands';
import { clusterIds, memberListsWithLearners } from './helpers/judge';
import { installKit, podNames, waitForMembers, type EtcdMinor } from './helpers/kit';
import { kubeStory } from './helpers/story';

describe.each<EtcdMinor>(['3.6', '3.4', '3.7'])('the deploy kit on etcd %s', (minor) => {
  kubeStory(
    'when the StatefulSet is scaled from 3 to 5 under a writer, then it has five voters, never more than one learner, one cluster id, and no acknowledged write is lost',
    `scale-out-${minor.replace('.', '')}`,
    async (s) => {
      await installKit(s, minor);
      s.writer.start();
      await s.moreWrites();
      const scaled = Date.now();
      s.step('kubectl scale --replicas=5');
      await mustKubectl(['scale', 'statefulset', 'etcd', '--replicas=5', '-n', s.namespace]);
      await waitForMembers(s, podNames(5));
      await s.moreWrites();
      const writes = await s.finishWrites();

      expect(memberListsWithLearners(s.etcd.records, 1)).toEqual([]);
      expect([...clusterIds(s.etcd.records).keys()]).toHaveLength(1);
      // Each new member was listed as a learner before it was a voter: it joined learner first.
      for (const name of ['etcd-3', 'etcd-4']) {
        const listed = s.etcd.records.flatMap((r) => r.members ?? []).find((m) => m.peerURLs.some((u) => u.includes(`//${name}.`)));
        expect({ name, isLearner: listed?.isLearner }).toEqual({ name, isLearner: true });
      }
      expect(writes.filter((w) => w.acknowledged && w.sentAt > scaled).length).toBeGreaterThan(0);
    },
  );
});
