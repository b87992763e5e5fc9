/**
 * A lost disk: a pod and its PVC deleted, under a writer. The StatefulSet controller makes the pod
 * again with a new, empty claim; its `prepare` finds an empty data directory for a member the
 * cluster lists, removes the old member and joins a new one, whose sidecar promotes it. The new pod
 * comes back as a new member (another member id), the old one is gone from the list, and every
 * acknowledged write is there.
 */
import { eventually } from '../helpers/eventually';
import { mustKubectl } from './helpers/commands';
import { installKit, podNames, waitForMembers } from './helpers/kit';
import { askEtcd } from './helpers/observe';
import { kubeStory } from './helpers/story';

kubeStory(
  'when a pod and its PVC are deleted, then the new pod comes back as a new member, the old member is removed, and no acknowledged write is lost',
  'lost-disk',
  async (s) => {
    await installKit(s, '3.6');
    s.writer.start();
    const members = async (): Promise<Map<string, string>> => {
      const answer = await askEtcd(s.pods.pod('etcd-0')!);
      if (answer.members === undefined) throw new Error(`etcd-0 gave no member list: ${answer.error}`);
      return new Map(answer.members.map((m) => [m.name, m.id]));
    };
    const before = await eventually(members, { within: 30_000 });
    const oldPod = s.pods.pod('etcd-2')!;
    const oldClaim = await s.api.get(`/api/v1/namespaces/${s.namespace}/persistentvolumeclaims/data-etcd-2`);

    await s.moreWrites();
    const lost = Date.now();
    s.step('kubectl delete pvc data-etcd-2; kubectl delete pod etcd-2');
    await mustKubectl(['delete', 'pvc', 'data-etcd-2', '--wait=false', '-n', s.namespace]);
    await mustKubectl(['delete', 'pod', 'etcd-2', '--wait=false', '-n', s.namespace]);
    await eventually(
      () => {
        const now = s.pods.pod('etcd-2');
        if (now === undefined || now.uid === oldPod.uid) throw new Error('etcd-2 has not been made again yet');
      },
      { within: 120_000 },
    );
    await waitForMembers(s, podNames(3));

    const after = await members();
    expect(after.get('etcd-2')).toBeDefined();
    expect(after.get('etcd-2')).not.toBe(before.get('etcd-2'));
    expect([...after.values()]).not.toContain(before.get('etcd-2'));
    expect(after.get('etcd-0')).toBe(before.get('etcd-0'));
    expect(after.get('etcd-1')).toBe(before.get('etcd-1'));
    const newClaim = await s.api.get(`/api/v1/namespaces/${s.namespace}/persistentvolumeclaims/data-etcd-2`);
    expect(newClaim.metadata.uid).not.toBe(oldClaim.metadata.uid);

    await s.moreWrites();
    const writes = await s.finishWrites();
    expect(writes.filter((w) => w.acknowledged && w.sentAt > lost).length).toBeGreaterThan(0);
  },
);
