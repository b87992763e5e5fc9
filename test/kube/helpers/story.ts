/**
 * One story on the cluster: a namespace of its own (Pod Security "restricted" enforced unless the
 * story says otherwise), its pods watched, every pod's agent and etcd asked over the pod IP all
 * along, and a writer through the client Service. The story's body drives kubectl; at the end the
 * writer's every acknowledged key is read back, and no pod may have been refused by admission.
 * The namespace is deleted whatever happened, and the harness waits until it is gone (its PVs are
 * then Released, for `kube.sh pvs` to hand to the next story). When the story fails (or always, with
 * KUBE_STORY_KEEP=1), its records, the namespace's objects and events, and every container's logs
 * are kept in a folder it names.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually, patience } from '../../helpers/eventually';
import { kubeconfig, kubectl, mustKubectl } from './commands';
import { accessOf, KubeApi } from './kube-api';
import { askEtcd, askHealth, PodPoller, PodWatch, type EtcdRecord, type HealthRecord } from './observe';
import { Writer, type WriteRecord } from './writer';

/** A story's patience as a whole (jest's timeout for it); each wait inside has its own. */
const STORY_PATIENCE_MS = 20 * 60_000;

/** What a story's body works with. */
export interface Story {
  namespace: string;
  api: KubeApi;
  pods: PodWatch;
  health: PodPoller<HealthRecord>;
  etcd: PodPoller<EtcdRecord>;
  writer: Writer;
  /** The client Service's URL (its ClusterIP), once the kit made it. */
  clientURL(): Promise<string>;
  /** Marks a step in the story's records. */
  step(what: string): void;
  steps: Array<{ at: number; what: string }>;
  /** More records a story keeps as evidence when it fails, by name (a KubeBlocks story's Cluster phases and agent logs). */
  evidence: Map<string, () => unknown>;
  /** Waits until the writer has had `count` more writes acknowledged than now (it writes through this moment). */
  moreWrites(count?: number): Promise<void>;
  /** Stops the writer and checks that every acknowledged write is there; answers the writes. */
  finishWrites(): Promise<WriteRecord[]>;
}

/** Options of a story. */
export interface StoryOptions {
  /** The namespace's Pod Security level, enforced by the API server (default `restricted`). */
  podSecurity?: 'restricted' | 'baseline' | 'privileged';
  /** The etcd client Service the writer writes through (default `etcd`, the kit's). */
  clientService?: string;
  /**
   * What owns the pods, deleted first when the namespace goes (default `statefulsets`; a KubeBlocks
   * story's pods are its Cluster's).
   */
  owners?: string;
}

/**
 * The pods the API server refused to the StatefulSet controller (admission: `pods "…" is forbidden`),
 * from the namespace's events. Other failed creations (a claim still being deleted) are retried by
 * the controller and are not refusals.
 */
export async function refusedPods(api: KubeApi, namespace: string): Promise<string[]> {
  const events = await api.list(`/api/v1/namespaces/${namespace}/events`);
  return events
    .filter((e) => e.reason === 'FailedCreate' && /\bpods? "[^"]*" is forbidden\b/.test(String(e.message)))
    .map((e) => String(e.message));
}

/** Defines a jest test that runs `body` as a story in namespace `namespace`. */
export function kubeStory(title: string, namespace: string, body: (s: Story) => Promise<void>, options: StoryOptions = {}): void {
  it(
    title,
    async () => {
      const started = Date.now();
      const api = new KubeApi(accessOf(kubeconfig()));
      const level = options.podSecurity ?? 'restricted';
      await mustKubectl(['apply', '-f', '-'], { input: namespaceManifest(namespace, level) });
      const pods = new PodWatch(api, namespace);
      const health = new PodPoller(pods, 300, (p) => askHealth(p)).start();
      const etcd = new PodPoller(pods, 300, askEtcd).start();
      let clientURL: string | undefined;
      const steps: Story['steps'] = [];
      const s: Story = {
        namespace,
        api,
        pods,
        health,
        etcd,
        steps,
        evidence: new Map(),
        clientURL: async () => {
          if (clientURL === undefined) {
            const service = await api.get(`/api/v1/namespaces/${namespace}/services/${options.clientService ?? 'etcd'}`);
            clientURL = `http://${String(service.spec.clusterIP)}:2379`;
          }
          return clientURL;
        },
        step: (what) => void steps.push({ at: Date.now(), what }),
        moreWrites: async (count = 20) => {
          const wanted = s.writer.acknowledged().length + count;
          await eventually(
            () => {
              const now = s.writer.acknowledged().length;
              if (now < wanted) throw new Error(`the writer has ${now} acknowledged writes, waiting for ${wanted}: ${s.writer.summary()}`);
            },
            { within: 120_000, every: 100 },
          );
        },
        writer: undefined as unknown as Writer,
        finishWrites: async () => {
          await s.writer.stop();
          const acknowledged = s.writer.acknowledged();
          expect(acknowledged.length).toBeGreaterThan(0);
          const url = await s.clientURL();
          const lost = await eventually(() => s.writer.lost(url), { within: 60_000, every: 1000 });
          expect({ lost: lost.map((w) => w.key), of: acknowledged.length }).toEqual({ lost: [], of: acknowledged.length });
          return s.writer.writes;
        },
      };
      s.writer = new Writer(() => s.clientURL(), `/kube-story/${namespace}/`);
      let failure: unknown;
      try {
        await body(s);
        expect(await refusedPods(api, namespace)).toEqual([]);
      } catch (err) {
        failure = err;
      }
      await s.writer.stop();
      await Promise.all([health.stop(), etcd.stop()]);
      if (failure !== undefined || process.env.KUBE_STORY_KEEP === '1') {
        const where = await keepEvidence(s).catch((err: unknown) => `(could not be kept: ${String(err)})`);
        if (failure instanceof Error) failure.message += `\n(the story's records, objects, events and logs: ${where})`;
        else process.stderr.write(`kube story ${namespace}: its records, objects, events and logs are in ${where}\n`);
      }
      pods.stop();
      const removing = Date.now();
      const removed = await removeNamespace(api, namespace, options.owners ?? 'statefulsets').catch((err: unknown) => err);
      process.stderr.write(
        `kube story ${namespace} ("${title}"): ${seconds(Date.now() - started)} s, of which ${seconds(Date.now() - removing)} s removing its namespace; writer: ${s.writer.summary()}\n`,
      );
      if (failure !== undefined) throw failure;
      if (removed instanceof Error) throw removed;
    },
    patience(STORY_PATIENCE_MS),
  );
}

const seconds = (ms: number): number => Math.round(ms / 1000);

function namespaceManifest(name: string, level: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name,
      labels: {
        'pod-security.kubernetes.io/enforce': level,
        'pod-security.kubernetes.io/enforce-version': 'latest',
        'pod-security.kubernetes.io/warn': level,
        'pod-security.kubernetes.io/warn-version': 'latest',
      },
    },
  });
}

/**
 * Deletes the namespace and waits until it is gone, with everything in it. What owns its pods
 * (`owners`: its StatefulSets, or a KubeBlocks Cluster) goes first, and their pods with them: the
 * namespace controller, finding pods still terminating, waits out their whole grace period before
 * it looks again, however soon they are gone.
 */
async function removeNamespace(api: KubeApi, namespace: string, owners: string): Promise<void> {
  await mustKubectl(['delete', owners, '--all', '-n', namespace, '--wait=false']);
  await eventually(
    async () => {
      const left = (await api.list(`/api/v1/namespaces/${namespace}/pods`)).map((p) => p.metadata.name);
      if (left.length > 0) throw new Error(`pods of namespace ${namespace} still there: ${left.join(', ')}`);
    },
    { within: 300_000, every: 500 },
  );
  await mustKubectl(['delete', 'namespace', namespace, '--wait=false', '--ignore-not-found']);
  await eventually(
    async () => {
      if (await api.exists(`/api/v1/namespaces/${namespace}`)) throw new Error(`namespace ${namespace} is still there`);
    },
    { within: 300_000, every: 1000 },
  );
}

/** Writes the story's records, objects, events and container logs into a folder; answers its path. */
async function keepEvidence(s: Story): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kube-story-${s.namespace}-`));
  const records = {
    ...Object.fromEntries([...s.evidence].map(([name, get]) => [name, get()])),
    steps: s.steps,
    pods: s.pods.records,
    health: s.health.records,
    etcd: s.etcd.records,
    writes: s.writer.writes,
  };
  fs.writeFileSync(path.join(dir, 'records.json'), JSON.stringify(records, null, 1));
  const ns = ['-n', s.namespace];
  const objects = await kubectl(['get', 'all,pvc,pdb,events', '-o', 'wide', ...ns]);
  // A KubeBlocks story's objects, and its controller's log (scripts/kube.sh kubeblocks writes it there).
  if (s.evidence.has('kubeblocks')) {
    const kubeblocks = await kubectl(['get', 'clusters,components,instancesets,opsrequests', '-o', 'yaml', ...ns]);
    fs.writeFileSync(path.join(dir, 'kubeblocks.yaml'), kubeblocks.stdout + kubeblocks.stderr);
    const manager = path.join(path.dirname(kubeconfig()), 'logs', 'kubeblocks-manager.log');
    if (fs.existsSync(manager)) fs.copyFileSync(manager, path.join(dir, 'kubeblocks-manager.log'));
  }
  fs.writeFileSync(path.join(dir, 'objects.txt'), objects.stdout + objects.stderr);
  const yaml = await kubectl(['get', 'pods,statefulset,pvc', '-o', 'yaml', ...ns]);
  fs.writeFileSync(path.join(dir, 'objects.yaml'), yaml.stdout + yaml.stderr);
  for (const [name, pod] of s.pods.objects) {
    const containers = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])] as Array<{ name: string }>;
    for (const c of containers) {
      for (const previous of [false, true]) {
        const logs = await kubectl(['logs', name, '-c', c.name, ...(previous ? ['--previous'] : []), ...ns]);
        if (logs.code === 0 && logs.stdout !== '')
          fs.writeFileSync(path.join(dir, `${name}.${c.name}${previous ? '.previous' : ''}.log`), logs.stdout);
      }
    }
  }
  return dir;
}
