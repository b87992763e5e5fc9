/**
 * kube-inject's output, applied as it is printed (`etcd-lifecycle-agent kube-inject -f …`, from
 * dist/ as a user runs the CLI), for two inputs:
 * - deploy/statefulset.yaml, a plain 3-member StatefulSet, in a namespace enforcing Pod Security
 *   "restricted": admitted, 3 Ready, healthy;
 * - the same StatefulSet with `hostNetwork: true`, injected with `--token-secret` and that Secret
 *   made first. Pods on the node's network share its ports, and this cluster has one node, so it
 *   runs one member (etcd-0 alone in its --initial-cluster); host namespaces are outside every
 *   Pod Security level but "privileged", so its namespace is that. Its agent listens on the node's
 *   loopback only, so its health is asked through `kubectl exec`, as a user would.
 * Each has a writer whose every acknowledged write is there at the end.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { ROOT } from '../helpers/built-agent';
import { agentCli, mustKubectl } from './helpers/commands';
import { etcdImage, freePVs, plainStatefulSet, podNames, waitForMembers } from './helpers/kit';
import type { PodRecord } from './helpers/observe';
import { kubeStory, type Story } from './helpers/story';

const TOKEN_SECRET = 'etcd-lifecycle-agent-token';

/** The agent's /v1/health through `kubectl exec … etcd-lifecycle-agent health` in the pod. */
async function healthByExec(s: Story, pod: PodRecord): Promise<{ pod: string; status?: string; voters?: number }> {
  const out = await mustKubectl([
    'exec',
    '-n',
    s.namespace,
    pod.name,
    '-c',
    'etcd-lifecycle-agent',
    '--',
    'etcd-lifecycle-agent',
    'health',
    '--json',
  ]).catch((err: unknown) => String(err));
  try {
    const body = JSON.parse(out) as { status?: string; quorum?: { voters: number } | null };
    return { pod: pod.name, status: body.status, voters: body.quorum?.voters };
  } catch {
    return { pod: pod.name, status: `no JSON: ${out.slice(0, 200)}` };
  }
}

describe('kube-inject', () => {
  kubeStory(
    'when its output for deploy/statefulset.yaml is applied in a restricted namespace, then every pod is admitted, all 3 turn Ready and /v1/health is healthy with 3 voters',
    'kube-inject',
    async (s) => {
      await freePVs();
      const injected = await agentCli(['kube-inject', '-f', path.join(ROOT, 'deploy/statefulset.yaml')]);
      s.step('kubectl apply -f - (kube-inject output)');
      await mustKubectl(['apply', '-n', s.namespace, '-f', '-'], { input: injected });
      await waitForMembers(s, podNames(3));
      s.writer.start();
      await s.moreWrites();
      await s.finishWrites();
    },
  );

  kubeStory(
    'when its output for a hostNetwork: true StatefulSet is applied with its token Secret, then the pod turns Ready and its agent says healthy with 1 voter',
    'kube-inject-host-network',
    async (s) => {
      await freePVs();
      const input = plainStatefulSet(etcdImage('3.6'), (sts) => {
        const spec = sts.spec as {
          replicas: number;
          template: { spec: Record<string, unknown> & { containers: Array<{ name: string; args: string[] }> } };
        };
        spec.replicas = 1;
        spec.template.spec.hostNetwork = true;
        spec.template.spec.dnsPolicy = 'ClusterFirstWithHostNet';
        const etcd = spec.template.spec.containers.find((c) => c.name === 'etcd')!;
        etcd.args = etcd.args.map((a) => (a.startsWith('--initial-cluster=') ? a.replace(/,.*$/, '') : a));
      });
      expect(input).toContain('--initial-cluster=etcd-0=http://etcd-0.etcd-headless.$(POD_NAMESPACE).svc.cluster.local:2380\n');
      await mustKubectl([
        'create',
        'secret',
        'generic',
        TOKEN_SECRET,
        `--from-literal=token=${crypto.randomBytes(24).toString('hex')}`,
        '-n',
        s.namespace,
      ]);
      const injected = await agentCli(['kube-inject', '-f', '-', '--token-secret', TOKEN_SECRET], input);
      s.step('kubectl apply -f - (kube-inject output, hostNetwork)');
      await mustKubectl(['apply', '-n', s.namespace, '-f', '-'], { input: injected });
      await waitForMembers(s, podNames(1), { health: (p) => healthByExec(s, p) });
      s.writer.start();
      await s.moreWrites();
      await s.finishWrites();
    },
    { podSecurity: 'privileged' },
  );
});
