/**
 * Install, then scale out, on etcd 3.6 (the kit's own version), 3.4 and 3.7:
 * - the deploy kit applied with `kubectl apply -k` (a test overlay of deploy/ in which only the
 *   images and the storage differ, helpers/kit.ts) in a namespace where the API server enforces Pod
 *   Security "restricted": every pod is admitted, all three turn Ready through kubelet's own probes,
 *   and each agent's /v1/health is `healthy` with 3 voters;
 * - then `kubectl scale sts etcd --replicas=5` under a writer. Each new pod's `prepare` joins its
 *   member as a learner and its sidecar promotes it; etcd allows one learner at a time, so the second
 *   new pod waits for the first. Every pod's etcd is asked for its status and member list all along:
 *   never more than one learner in any list, one cluster id in every answer, five voters at the end,
 *   and every acknowledged write there.
 */
import { kubectl, mustKubectl } from './helpers/commands';
import { clusterIds, memberListsWithLearners } from './helpers/judge';
import { installKit, podNames, waitForMembers, type EtcdMinor } from './helpers/kit';
import { kubeStory } from './helpers/story';

describe.each<EtcdMinor>(['3.6', '3.4', '3.7'])('the deploy kit on etcd %s', (minor) => {
  kubeStory(
    'when it is applied with kubectl apply -k in a restricted namespace and scaled from 3 to 5 under a writer, then every pod is admitted, it has five voters, never more than one learner, one cluster id, and no acknowledged write is lost',
    `scale-out-${minor.replace('.', '')}`,
    async (s) => {
      // The namespace really enforces "restricted": a pod that asks for nothing is refused.
      const stranger = await kubectl(['run', 'stranger', '--image=registry.k8s.io/pause:3.10', '--dry-run=server', '-n', s.namespace]);
      expect({ code: stranger.code, refused: /violates PodSecurity "restricted:latest"/.test(stranger.stderr) }).toEqual({
        code: 1,
        refused: true,
      });
      const applied = await installKit(s, minor);
      expect(applied.warnings).not.toMatch(/PodSecurity/);

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
