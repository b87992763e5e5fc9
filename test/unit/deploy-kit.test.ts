/**
 * The deploy kit (deploy/kustomization.yaml and its flavours) rendered offline by `kubectl kustomize`:
 * every object validates against its schema, and the pieces fit each other (selectors select the
 * workload's pods, the ServiceMonitor finds the metrics Service, the agent's image comes from the one
 * `images:` entry, the NetworkPolicy closes the agent's port alone).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { K8sObject, schemaErrors } from '../helpers/k8s-schemas';

const ROOT = path.join(__dirname, '..', '..');
const DEPLOY = path.join(ROOT, 'deploy');
const AGENT_PORT = 3501;

type Json = Record<string, unknown>;

function kustomize(dir: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('kubectl', ['kustomize', dir], { timeout: 60_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const missing =
        (err as NodeJS.ErrnoException | null)?.code === 'ENOENT'
          ? ' (kubectl is not installed: this test needs kubectl with kustomize v5)'
          : '';
      if (err !== null) reject(new Error(`kubectl kustomize ${dir} failed${missing}: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

/** deploy/ rendered with the flavour `name` (a copy of deploy/ whose components: names it). */
async function render(name: 'statefulset' | 'kubeblocks'): Promise<K8sObject[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-kit-'));
  try {
    fs.cpSync(DEPLOY, dir, { recursive: true });
    const file = path.join(dir, 'kustomization.yaml');
    const text = fs.readFileSync(file, 'utf8');
    const chosen = text.replace(/^- overlays\/\w+$/m, `- overlays/${name}`);
    expect(chosen).toMatch(new RegExp(`^- overlays/${name}$`, 'm'));
    fs.writeFileSync(file, chosen);
    return parseAllDocuments(await kustomize(dir)).map((d) => d.toJS() as K8sObject);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const kustomization = parse(fs.readFileSync(path.join(DEPLOY, 'kustomization.yaml'), 'utf8')) as {
  images: Array<{ name: string; newName: string; newTag: string }>;
};
const AGENT_IMAGE = `${kustomization.images[0].newName}:${kustomization.images[0].newTag}`;

const one = (objects: K8sObject[], kind: string, name?: string): Json => {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (found.length !== 1) throw new Error(`${found.length} ${kind} ${name ?? ''} rendered`);
  return found[0] as Json;
};
const at = (o: unknown, ...keys: string[]): unknown => keys.reduce<unknown>((v, k) => (v as Json | undefined)?.[k], o);
const selects = (selector: unknown, labels: unknown): boolean =>
  Object.entries((selector ?? {}) as Json).every(([k, v]) => (labels as Json)?.[k] === v) &&
  Object.keys((selector ?? {}) as Json).length > 0;

/** Every `image` value anywhere in an object, and every value of an `images` map (a ComponentVersion's), with where it is. */
function images(o: unknown, where = ''): Array<{ where: string; image: string }> {
  if (Array.isArray(o)) return o.flatMap((v, i) => images(v, `${where}[${i}]`));
  if (o === null || typeof o !== 'object') return [];
  return Object.entries(o).flatMap(([k, v]) => {
    if (k === 'image' && typeof v === 'string') return [{ where: `${where}.${k}`, image: v }];
    if (k === 'images' && v !== null && typeof v === 'object' && !Array.isArray(v))
      return Object.entries(v).flatMap(([c, i]) => (typeof i === 'string' ? [{ where: `${where}.images.${c}`, image: i }] : []));
    return images(v, `${where}.${k}`);
  });
}

describe('deploy/ rendered by kubectl kustomize', () => {
  let flavours: Record<'statefulset' | 'kubeblocks', K8sObject[]>;

  beforeAll(async () => {
    const [statefulset, kubeblocks] = await Promise.all([render('statefulset'), render('kubeblocks')]);
    flavours = { statefulset, kubeblocks };
  }, 60_000);

  it('when deploy/ is rendered as committed, then it is the StatefulSet flavour', async () => {
    const committed = parseAllDocuments(await kustomize(DEPLOY)).map((d) => d.toJS());
    expect(committed).toEqual(flavours.statefulset);
  });

  it.each([
    [
      'statefulset',
      [
        'NetworkPolicy etcd-lifecycle-agent',
        'PodDisruptionBudget etcd',
        'PrometheusRule etcd-lifecycle-agent',
        'Service etcd',
        'Service etcd-headless',
        'Service etcd-lifecycle-agent',
        'ServiceMonitor etcd-lifecycle-agent',
        'StatefulSet etcd',
      ],
    ],
    [
      'kubeblocks',
      [
        'ComponentDefinition etcd-with-lifecycle-agent',
        'ComponentVersion etcd-with-lifecycle-agent',
        'NetworkPolicy etcd-lifecycle-agent',
        'PodDisruptionBudget etcd',
        'PrometheusRule etcd-lifecycle-agent',
        'Service etcd-lifecycle-agent',
        'ServiceMonitor etcd-lifecycle-agent',
      ],
    ],
  ] as const)(
    'when the %s flavour is rendered, then it has exactly its objects and each validates against its schema',
    (name, expected) => {
      const objects = flavours[name];
      const kinds = objects.map((o) => `${o.kind} ${o.metadata.name}`).sort();
      expect(kinds).toEqual(expected);
      expect(objects.flatMap(schemaErrors)).toEqual([]);
    },
  );

  it('when a rendered object is broken, then the schemas say so (the validation is not vacuous)', () => {
    const sts = structuredClone(one(flavours.statefulset, 'StatefulSet')) as K8sObject;
    delete (sts.spec as Json).selector;
    const pdb = structuredClone(one(flavours.statefulset, 'PodDisruptionBudget')) as K8sObject;
    (pdb.spec as Json).maxUnavailable = { one: 1 };
    const monitor = structuredClone(one(flavours.statefulset, 'ServiceMonitor')) as K8sObject;
    (monitor.spec as { endpoints: Json[] }).endpoints[0].interval = 'often';
    const definition = structuredClone(one(flavours.kubeblocks, 'ComponentDefinition')) as K8sObject;
    (definition.spec as Json).runtimee = {};
    for (const broken of [sts, pdb, monitor, definition]) expect(schemaErrors(broken)).toHaveLength(1);
  });

  it.each(['statefulset', 'kubeblocks'] as const)(
    'when the %s flavour is rendered, then every agent image is the one set in images:',
    (name) => {
      const agentImages = flavours[name].flatMap((o) => images(o)).filter((i) => i.image.includes('etcd-lifecycle-agent'));
      expect(agentImages.length).toBeGreaterThan(0);
      expect(agentImages.filter((i) => i.image !== AGENT_IMAGE)).toEqual([]);
    },
  );

  it.each(['statefulset', 'kubeblocks'] as const)(
    'when the %s flavour is rendered, then the PDB allows one member down and the policies select the etcd pods',
    (name) => {
      const objects = flavours[name];
      const podLabels =
        name === 'statefulset'
          ? (at(one(objects, 'StatefulSet'), 'spec', 'template', 'metadata', 'labels') as Json)
          : // KubeBlocks labels a Cluster's pods with its name and the component's.
            {
              'app.kubernetes.io/instance': 'etcd-cluster',
              'apps.kubeblocks.io/component-name': 'etcd',
              'app.kubernetes.io/managed-by': 'kubeblocks',
            };
      const pdb = one(objects, 'PodDisruptionBudget');
      expect(at(pdb, 'spec', 'maxUnavailable')).toBe(1);
      expect(selects(at(pdb, 'spec', 'selector', 'matchLabels'), podLabels)).toBe(true);
      expect(selects(at(one(objects, 'NetworkPolicy'), 'spec', 'podSelector', 'matchLabels'), podLabels)).toBe(true);
      const metrics = one(objects, 'Service', 'etcd-lifecycle-agent');
      expect(selects(at(metrics, 'spec', 'selector'), podLabels)).toBe(true);
      const monitor = one(objects, 'ServiceMonitor');
      expect(selects(at(monitor, 'spec', 'selector', 'matchLabels'), at(metrics, 'metadata', 'labels'))).toBe(true);
      const port = (at(monitor, 'spec', 'endpoints') as Json[])[0];
      expect(port).toMatchObject({ port: 'lifecycle', path: '/metrics' });
      expect(at(metrics, 'spec', 'ports')).toContainEqual(expect.objectContaining({ name: 'lifecycle', port: AGENT_PORT }));
    },
  );

  it.each(['statefulset', 'kubeblocks'] as const)(
    'when the %s flavour is rendered, then the NetworkPolicy closes the agent port alone',
    (name) => {
      const policy = one(flavours[name], 'NetworkPolicy');
      const rules = at(policy, 'spec', 'ingress') as Array<{
        ports: Array<{ protocol: string; port: number; endPort?: number }>;
        from?: Json[];
      }>;
      const open = (port: number): boolean =>
        rules.some(
          (r) => r.from === undefined && r.ports.some((p) => p.protocol === 'TCP' && p.port <= port && port <= (p.endPort ?? p.port)),
        );
      // Every TCP port but the agent's is open to all, as without the policy (etcd, kbagent).
      for (const port of [1, 2379, 2380, 2381, 3500, 3502, 65535]) expect(open(port)).toBe(true);
      expect(open(AGENT_PORT)).toBe(false);
      const toAgent = rules.filter((r) => r.ports.some((p) => p.port === AGENT_PORT)).flatMap((r) => r.from ?? []);
      expect(toAgent).toEqual([
        { podSelector: { matchLabels: at(policy, 'spec', 'podSelector', 'matchLabels') } },
        { namespaceSelector: {}, podSelector: { matchLabels: { 'etcd-lifecycle-agent/client': 'true' } } },
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
      ]);
    },
  );

  it('when the StatefulSet flavour is rendered, then the pod runs RuntimeDefault seccomp and every probe has a timeout', () => {
    const podSpec = at(one(flavours.statefulset, 'StatefulSet'), 'spec', 'template', 'spec') as Json;
    expect(at(podSpec, 'securityContext', 'seccompProfile')).toEqual({ type: 'RuntimeDefault' });
    const containers = podSpec.containers as Json[];
    const sidecar = containers.find((c) => c.name === 'etcd-lifecycle-agent');
    expect(at(sidecar, 'securityContext', 'seccompProfile')).toEqual({ type: 'RuntimeDefault' });
    const probes = containers
      .flatMap((c) => ['livenessProbe', 'readinessProbe', 'startupProbe'].map((p) => [`${c.name}.${p}`, c[p]] as const))
      .filter(([, p]) => p !== undefined);
    expect(probes.length).toBeGreaterThanOrEqual(4);
    expect(probes.filter(([, p]) => typeof (p as Json).timeoutSeconds !== 'number').map(([where]) => where)).toEqual([]);
  });

  it("when the StatefulSet flavour is rendered, then a pod scaled away loses its PVC and a deleted StatefulSet's PVCs stay", () => {
    // The schema (Kubernetes 1.27's OpenAPI) types both fields as strings; the API server takes only these two values.
    expect(at(one(flavours.statefulset, 'StatefulSet'), 'spec', 'persistentVolumeClaimRetentionPolicy')).toEqual({
      whenScaled: 'Delete',
      whenDeleted: 'Retain',
    });
  });

  it('when the PrometheusRule is rendered, then it carries deploy/prometheus/rules.yaml unchanged', () => {
    const rules = parse(fs.readFileSync(path.join(DEPLOY, 'prometheus', 'rules.yaml'), 'utf8')) as Json;
    for (const name of ['statefulset', 'kubeblocks'] as const) {
      expect(at(one(flavours[name], 'PrometheusRule'), 'spec', 'groups')).toEqual(rules.groups);
    }
  });
});
