/**
 * jest globalSetup of the kube project: everything the Kubernetes stories need, made or checked
 * before the first one starts, and nothing skipped. Without root, kubectl or a working build, the
 * run fails here and says which.
 * - dist/ (the stories run kube-inject from it, as a user runs the CLI);
 * - the images, from `bash scripts/image.sh` (the agent from the Dockerfile, etcd of every tested
 *   version, the pause image, KubeBlocks' tools image; each built once per machine, kept by content);
 * - KubeBlocks' controller manager, from `bash scripts/kubeblocks.sh` (built once per machine; the
 *   KubeBlocks stories start it on the cluster);
 * - the one-node cluster, `bash scripts/kube.sh up <archives>`, and its kubeconfig in KUBECONFIG;
 * - the Prometheus Operator's two CRDs the kit's ServiceMonitor and PrometheusRule need, as stand-ins
 *   that take any spec (their schemas are checked offline by test/unit/deploy-kit.test.ts; no
 *   operator runs here).
 * KUBE_STORY_IMAGES tells the stories the images' names (read from the archives themselves).
 * When anything after `up` fails, the cluster is taken down again before the error is thrown: jest
 * runs no globalTeardown after a failed globalSetup.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { buildAgentIfStale, ROOT } from '../../helpers/built-agent';
import { patience } from '../../helpers/eventually';
import { mustRun, runCommand } from './commands';

/** Runs `bash script args…` with its progress (stderr) shown; answers its stdout. */
function script(name: string, args: string[] = []): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [path.join(ROOT, 'scripts', name), ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve(stdout);
      else reject(new Error(`bash scripts/${name} ${args.join(' ')} exited ${code} (its output is above)`));
    });
  });
}

/** The one image name a docker-archive holds (its manifest.json's RepoTags). */
async function imageIn(archive: string): Promise<string> {
  const manifest = JSON.parse(await mustRun('tar', ['-xOf', archive, 'manifest.json'])) as Array<{ RepoTags?: string[] }>;
  const tags = manifest.flatMap((m) => m.RepoTags ?? []);
  if (tags.length !== 1) throw new Error(`${archive} holds ${tags.length} image names, expected one`);
  return tags[0];
}

/** kubelet asks for docker.io/library/NAME when a manifest says NAME: the short name, as manifests write it. */
const shortName = (image: string): string => image.replace(/^docker\.io\/library\//, '');

function crd(kind: string, plural: string): object {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.monitoring.coreos.com` },
    spec: {
      group: 'monitoring.coreos.com',
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  };
}

export default async function globalSetup(): Promise<void> {
  if (process.getuid?.() !== 0)
    throw new Error(
      'the Kubernetes stories (jest project kube) must run as root: scripts/kube.sh makes a network namespace, mounts and cgroups, and scripts/image.sh runs buildah',
    );
  const kubectlThere = await runCommand('kubectl', ['version', '--client']).catch((err: unknown) => ({ code: -1, stderr: String(err) }));
  if (kubectlThere.code !== 0)
    throw new Error(
      `the Kubernetes stories drive the cluster with kubectl (with kustomize v5), and it cannot be run: ${kubectlThere.stderr}`,
    );

  await buildAgentIfStale();
  await script('kubeblocks.sh');
  const archives = (await script('image.sh'))
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const names = await Promise.all(archives.map(imageIn));
  const etcd: Record<string, string> = {};
  let agent: string | undefined;
  for (const name of names) {
    const version = /^quay\.io\/coreos\/etcd:v(\d+\.\d+)\.\d+$/.exec(name);
    if (version !== null) etcd[version[1]] = name;
    else if (/\/etcd-lifecycle-agent:[^/]+$/.test(name)) agent = shortName(name);
  }
  if (agent === undefined) throw new Error(`scripts/image.sh printed no etcd-lifecycle-agent image: ${names.join(', ')}`);
  process.env.KUBE_STORY_IMAGES = JSON.stringify({ agent, etcd });

  await script('kube.sh', ['up', ...archives]);
  try {
    const kubeconfig = (await script('kube.sh', ['kubeconfig'])).trim();
    process.env.KUBECONFIG = kubeconfig;
    const crds = [crd('ServiceMonitor', 'servicemonitors'), crd('PrometheusRule', 'prometheusrules')];
    await mustRun('kubectl', ['--kubeconfig', kubeconfig, 'apply', '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: crds }),
    });
    await mustRun('kubectl', [
      '--kubeconfig',
      kubeconfig,
      'wait',
      '--for=condition=Established',
      `--timeout=${Math.ceil(patience(120_000) / 1000)}s`,
      'crd/servicemonitors.monitoring.coreos.com',
      'crd/prometheusrules.monitoring.coreos.com',
    ]);
  } catch (err) {
    await script('kube.sh', ['down']).catch(() => undefined);
    throw err;
  }
}
