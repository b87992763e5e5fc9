/**
 * Containers killed: the etcd container of one pod, then the agent container of another, each
 * SIGKILLed through containerd (`ctr task kill -s SIGKILL`, as the kernel's OOM killer or a crash
 * would end it), under a writer. kubelet restarts each in its pod (the same pod: same uid, the
 * container's restart count one higher, its last state a termination by signal 9), the pod turns
 * Ready again, the members agree, and every acknowledged write is there.
 */
import { eventually } from '../helpers/eventually';
import { ctr } from './helpers/commands';
import { installKit, podNames, waitForMembers } from './helpers/kit';
import { kubeStory } from './helpers/story';

kubeStory(
  'when the etcd container and then the agent container are SIGKILLed, then kubelet restarts each, the pod turns Ready again, and no acknowledged write is lost',
  'containers-killed',
  async (s) => {
    await installKit(s, '3.6');
    s.writer.start();
    for (const [pod, container] of [
      ['etcd-1', 'etcd'],
      ['etcd-2', 'etcd-lifecycle-agent'],
    ] as const) {
      await s.moreWrites();
      const before = s.pods.pod(pod)!;
      const state = before.containers[container];
      const id = state.containerID?.replace(/^containerd:\/\//, '');
      if (id === undefined) throw new Error(`${pod} has no container id for ${container}`);
      const killed = Date.now();
      s.step(`SIGKILL ${pod}/${container}`);
      await ctr(['task', 'kill', '--signal', 'SIGKILL', id]);
      await eventually(
        () => {
          const now = s.pods.pod(pod)!;
          const c = now.containers[container];
          expect({ uid: now.uid, restarts: c.restartCount, exitCode: c.lastTerminated?.exitCode, ready: now.ready }).toEqual({
            uid: before.uid,
            restarts: state.restartCount + 1,
            exitCode: 137,
            ready: true,
          });
        },
        { within: 180_000, every: 250 },
      );
      // It was seen not Ready in between: the kill was felt, not missed.
      expect(s.pods.records.some((r) => r.name === pod && r.at > killed && !r.containers[container]?.ready)).toBe(true);
      await waitForMembers(s, podNames(3));
      await s.moreWrites();
      expect(s.writer.acknowledged().filter((w) => w.sentAt > killed).length).toBeGreaterThan(0);
    }
    await s.finishWrites();
  },
);
