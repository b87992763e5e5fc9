/**
 * Install: the deploy kit applied with `kubectl apply -k` (a test overlay of deploy/ in which only
 * the images and the storage differ, helpers/kit.ts) in a namespace where the API server enforces
 * Pod Security "restricted". Every pod is admitted, all three turn Ready through kubelet's own
 * probes, and each agent's /v1/health is `healthy` with 3 voters; a writer's every acknowledged
 * write is there at the end. On etcd 3.6, the kit's version, and on 3.4 and 3.7.
 */
import { kubectl } from './helpers/commands';
import { installKit, type EtcdMinor } from './helpers/kit';
import { kubeStory } from './helpers/story';

describe.each<EtcdMinor>(['3.6', '3.4', '3.7'])('the deploy kit on etcd %s', (minor) => {
  kubeStory(
    'when it is applied with kubectl apply -k in a restricted namespace, then every pod is admitted, all 3 turn Ready through their probes and /v1/health is healthy with 3 voters',
    `install-${minor.replace('.', '')}`,
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
      await s.finishWrites();
    },
  );
});
