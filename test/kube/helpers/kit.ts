/**
 * The deploy kit as a story applies it: `kubectl apply -k` of a test overlay of deploy/ in which
 * only the images and the storage differ. The agent's image is named where the kit says to name it
 * (the local build, not registry.example.com), and the StatefulSet's claims ask for the cluster's
 * StorageClass by name. On etcd 3.6 the kit's own workload (deploy/statefulset-with-agent.yaml)
 * runs unchanged; on another version the workload is made as deploy/ tells a user to make it:
 * deploy/statefulset.yaml with that version's image, through kube-inject, whose etcd probes
 * follow the image's version (so the example's `/livez` probe, which etcd 3.4 does not serve, is
 * left for kube-inject to choose).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { eventually } from '../../helpers/eventually';
import { ROOT } from '../../helpers/built-agent';
import { agentCli, kubeconfig, kubeSh, runCommand } from './commands';
import { askEtcd, askHealth, type HealthRecord, type PodRecord } from './observe';
import { refusedPods, type Story } from './story';

/** The etcd versions the stories run on; the kit's own is 3.6. */
export type EtcdMinor = '3.4' | '3.6' | '3.7';

/** The StorageClass of the PVs scripts/kube.sh makes. */
const STORAGE_CLASS = 'local';
const DEPLOY = path.join(ROOT, 'deploy');

/** The images the global setup imported: the agent's and etcd's of each version (KUBE_STORY_IMAGES). */
export function images(): { agent: string; etcd: Record<string, string> } {
  const raw = process.env.KUBE_STORY_IMAGES;
  if (raw === undefined) throw new Error('KUBE_STORY_IMAGES is not set: the kube project’s global setup sets it');
  return JSON.parse(raw) as { agent: string; etcd: Record<string, string> };
}

/** etcd's image of version `minor`. */
export function etcdImage(minor: EtcdMinor): string {
  const image = images().etcd[minor];
  if (image === undefined) throw new Error(`no etcd ${minor} image was imported (scripts/image.sh etcd ${minor})`);
  return image;
}

type Json = Record<string, unknown>;
/** The containers of a StatefulSet document. */
const containersOf = (doc: Json): Array<Json & { name: string; image?: string }> =>
  ((doc.spec as Json).template as { spec: { containers: Array<Json & { name: string }> } }).spec.containers;

/**
 * deploy/statefulset.yaml with etcd's image `image`, then `edit`ed: kube-inject's input. For another
 * etcd version than the file's, the etcd container's probes are left out, for kube-inject to choose
 * by the image's version.
 */
export function plainStatefulSet(image: string, edit: (statefulSet: Json) => void = () => undefined): string {
  const docs = parseAllDocuments(fs.readFileSync(path.join(DEPLOY, 'statefulset.yaml'), 'utf8')).map((d) => d.toJS() as Json);
  const sts = docs.find((d) => d.kind === 'StatefulSet');
  if (sts === undefined) throw new Error('deploy/statefulset.yaml has no StatefulSet');
  const etcd = containersOf(sts).find((c) => c.name === 'etcd');
  if (etcd === undefined) throw new Error('deploy/statefulset.yaml has no container named etcd');
  if (etcd.image !== image) {
    etcd.image = image;
    delete etcd.livenessProbe;
    delete etcd.readinessProbe;
  }
  edit(sts);
  return docs.map((d) => stringify(d)).join('---\n');
}

/** Writes the test overlay of deploy/ for etcd `minor` into a new temporary folder; answers the overlay's path. */
export async function renderKit(minor: EtcdMinor): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kube-kit-${minor}-`));
  const kit = path.join(dir, 'kit');
  fs.cpSync(DEPLOY, kit, { recursive: true });
  const workload = path.join(kit, 'statefulset-with-agent.yaml');
  if (minor === '3.6') {
    const shipped = fs.readFileSync(workload, 'utf8');
    if (!shipped.includes(`image: ${etcdImage('3.6')}\n`))
      throw new Error(`deploy/statefulset-with-agent.yaml does not run ${etcdImage('3.6')}, the etcd 3.6 image scripts/image.sh built`);
  } else {
    fs.writeFileSync(workload, await agentCli(['kube-inject', '-f', '-'], plainStatefulSet(etcdImage(minor))));
  }
  // The agent's image is named once, under images: of deploy/kustomization.yaml; the overlay names the local build.
  const kitImages = (parse(fs.readFileSync(path.join(kit, 'kustomization.yaml'), 'utf8')) as { images: Array<{ newName: string }> }).images;
  const [agentName, agentTag] = images().agent.split(':');
  const overlay = path.join(dir, 'overlay');
  fs.mkdirSync(overlay);
  fs.writeFileSync(
    path.join(overlay, 'kustomization.yaml'),
    stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: ['../kit'],
      images: [{ name: kitImages[0].newName, newName: agentName, newTag: agentTag }],
      patches: [
        {
          target: { group: 'apps', kind: 'StatefulSet', name: 'etcd' },
          patch: stringify([{ op: 'add', path: '/spec/volumeClaimTemplates/0/spec/storageClassName', value: STORAGE_CLASS }]),
        },
      ],
    }),
  );
  return overlay;
}

/** The names of a StatefulSet `etcd` of `replicas` pods. */
export const podNames = (replicas: number): string[] => Array.from({ length: replicas }, (_, i) => `etcd-${i}`);

/** Every PV Released by an earlier story emptied and Available again, and at least `count` Available. */
export async function freePVs(count = 6): Promise<void> {
  await kubeSh(['pvs', String(count)]);
}

/**
 * Applies the kit for etcd `minor` in the story's namespace and waits until its 3 pods are Ready and
 * each agent says `healthy` with 3 voters. Answers what `kubectl apply` printed.
 */
export async function installKit(s: Story, minor: EtcdMinor): Promise<{ stdout: string; warnings: string }> {
  await freePVs();
  const overlay = await renderKit(minor);
  s.step(`kubectl apply -k (etcd ${minor})`);
  const applied = await mustKubectlWithWarnings(['apply', '-n', s.namespace, '-k', overlay]);
  fs.rmSync(path.dirname(overlay), { recursive: true, force: true });
  await waitForMembers(s, podNames(3));
  s.step('installed');
  return applied;
}

/** kubectl that also answers what it warned of on stderr. */
async function mustKubectlWithWarnings(args: string[]): Promise<{ stdout: string; warnings: string }> {
  const ran = await runCommand('kubectl', ['--kubeconfig', kubeconfig(), ...args]);
  if (ran.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${ran.code}:\n${ran.stderr}${ran.stdout}`);
  return { stdout: ran.stdout, warnings: ran.stderr };
}

/** A line per pod, for a failure message. */
export function podLines(pods: Iterable<PodRecord>): string {
  return [...pods]
    .map((p) => {
      const cs = Object.entries(p.containers)
        .map(([n, c]) => `${n}:${c.ready ? 'ready' : 'not ready'}/${c.restartCount}`)
        .join(' ');
      return `${p.name} ${p.phase}${p.ready ? ' Ready' : ''}${p.deleting ? ' deleting' : ''} ${cs}`;
    })
    .join('; ');
}

/**
 * Waits until exactly the pods `names` are there, each Ready (kubelet's readiness probes passed for
 * every container) and not being deleted; then until etcd lists exactly those members, all voters,
 * one cluster id among them, and every pod's agent answers `healthy` with that many voters (asked
 * over the pod IP, or as `health` asks).
 * A pod refused by admission fails at once, with the API server's reason.
 */
export async function waitForMembers(
  s: Story,
  names: string[],
  {
    withinMs = 300_000,
    health = (p: PodRecord) => askHealth(p),
    othersContainers = [],
  }: {
    withinMs?: number;
    health?: (p: PodRecord) => Promise<Pick<HealthRecord, 'pod' | 'status' | 'voters'>>;
    /** Containers someone else adds to the pods (KubeBlocks' kbagent), whose probes are theirs. */
    othersContainers?: string[];
  } = {},
): Promise<void> {
  const refused = await eventually(
    async () => {
      const refusals = await refusedPods(s.api, s.namespace);
      if (refusals.length > 0) return refusals;
      const now = s.pods.current();
      const ready = names.every((n) => now.get(n)?.ready === true && !now.get(n)!.deleting);
      if (!ready || now.size !== names.length)
        throw new Error(`waiting for exactly ${names.join(', ')} Ready; pods now: ${podLines(now.values()) || 'none'}`);
      return [];
    },
    { within: withinMs, every: 500 },
  );
  expect(refused).toEqual([]);
  for (const name of names) {
    const spec = s.pods.objects.get(name)?.spec as { containers: Array<{ name: string; readinessProbe?: unknown }> };
    expect(spec.containers.filter((c) => c.readinessProbe === undefined && !othersContainers.includes(c.name)).map((c) => c.name)).toEqual(
      [],
    );
  }
  await eventually(
    async () => {
      const pods = names.map((n) => s.pods.pod(n)!);
      const answers = await Promise.all(pods.map(askEtcd));
      const ids = new Set(answers.map((a) => a.clusterId));
      const listed = answers.find((a) => a.members !== undefined)?.members ?? [];
      const got = {
        clusterIds: ids.size,
        members: listed.map((m) => `${m.name}${m.isLearner ? ' (learner)' : ''}`).sort(),
        errors: answers.filter((a) => a.error !== undefined).map((a) => `${a.pod}: ${a.error}`),
      };
      expect(got).toEqual({ clusterIds: 1, members: [...names].sort(), errors: [] });
      const healths = await Promise.all(pods.map(health));
      expect(healths.map((h) => ({ pod: h.pod, status: h.status, voters: h.voters }))).toEqual(
        pods.map((p) => ({ pod: p.name, status: 'healthy', voters: names.length })),
      );
    },
    { within: withinMs, every: 1000 },
  );
}
