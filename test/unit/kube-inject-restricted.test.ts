/**
 * kube-inject and Pod Security "restricted" (kube-inject-restricted.ts): the pods it prints are
 * admitted there wherever the input allows it, the input's own values are kept, and each value of
 * the input that "restricted" refuses is named in one warning. The deploy kit's pods are checked
 * against the same rules.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { kubeInject } from '../../agent/cli/kube-inject';
import { runKubeInject } from '../../agent/cli/kube-inject-command';
import { etcdRunAs, restrictedFindings } from '../../agent/cli/kube-inject-restricted';
import { kubeInjectHarness } from '../helpers/kube-inject-io';

const ROOT = join(__dirname, '..', '..');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'kube-inject');

// Manifests are walked field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const fixture = (name: string): string => readFileSync(join(FIXTURES, name), 'utf8');
const docs = (text: string): Json[] => parseAllDocuments(text).map((d) => d.toJS());

/** The pod specs of StatefulSets and Pods, also inside lists. */
function podSpecs(resources: Json[]): Json[] {
  return resources.flatMap((r: Json): Json[] => {
    if (r?.kind === 'StatefulSet') return [r.spec.template.spec];
    if (r?.kind === 'Pod') return [r.spec];
    if (r?.kind === 'List') return podSpecs(r.items);
    return [];
  });
}

const allContainers = (pod: Json): Json[] => [...(pod.initContainers ?? []), ...(pod.containers ?? [])];

/**
 * What "restricted" asks that a pod sets (the rules that a missing field breaks), beside what
 * restrictedFindings names (the rules a value breaks): Kubernetes' own checks, 1.34.
 */
function missing(pod: Json): string[] {
  const out: string[] = [];
  const sc = pod.securityContext ?? {};
  for (const c of allContainers(pod)) {
    const csc = c.securityContext ?? {};
    if (csc.allowPrivilegeEscalation !== false) out.push(`${c.name}: allowPrivilegeEscalation`);
    if (!(csc.capabilities?.drop ?? []).includes('ALL')) out.push(`${c.name}: capabilities.drop ALL`);
    if ((csc.runAsNonRoot ?? sc.runAsNonRoot) !== true) out.push(`${c.name}: runAsNonRoot`);
    if (sc.seccompProfile === undefined && csc.seccompProfile === undefined) out.push(`${c.name}: seccompProfile`);
    // A kubelet gives gid 0 to a container that names a user but no group.
    if ((csc.runAsUser ?? sc.runAsUser) !== undefined && (csc.runAsGroup ?? sc.runAsGroup) === undefined) out.push(`${c.name}: runAsGroup`);
  }
  return out;
}

/** Every reason "restricted" refuses `pod`: none when it admits it. */
const refusals = (pod: Json): string[] => [...restrictedFindings(pod).map((f) => `${f.field}=${f.value}`), ...missing(pod)];

/** The first StatefulSet's pod spec of `text`, after `change` (on plain data), as YAML again. */
function changed(change: (pod: Json) => void, text = fixture('statefulset.yaml')): string {
  const doc = parse(text);
  change(doc.spec.template.spec);
  return stringify(doc);
}

function inject(text: string, options = {}): { pod: Json; warnings: string[] } {
  const warnings: string[] = [];
  const out = kubeInject(text, options, (line) => warnings.push(line));
  return { pod: podSpecs(docs(out))[0], warnings };
}

describe('a pod kube-inject prints, against Pod Security "restricted"', () => {
  it.each(['statefulset.yaml', 'pod.yaml', 'list.yaml', 'multi-document.yaml'])(
    'when %s is injected, then every pod of it is admitted and nothing is warned',
    (file) => {
      const warnings: string[] = [];
      const pods = podSpecs(docs(kubeInject(fixture(file), {}, (line) => warnings.push(line))));
      expect(pods.length).toBeGreaterThan(0);
      for (const pod of pods) expect(refusals(pod)).toEqual([]);
      expect(warnings).toEqual([]);
    },
  );

  it('when the input names no user, then every container runs as 65532:65532 and the volume belongs to group 65532, taken over when its top lacks it', () => {
    const { pod } = inject(fixture('statefulset.yaml'));

    expect(pod.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      fsGroup: 65532,
      fsGroupChangePolicy: 'OnRootMismatch',
      seccompProfile: { type: 'RuntimeDefault' },
    });
    for (const c of allContainers(pod)) {
      expect([c.name, c.securityContext.runAsUser ?? 65532, c.securityContext.runAsGroup ?? 65532]).toEqual([c.name, 65532, 65532]);
    }
  });

  it('when the input sets its own values, then they are kept as they are, and only what is missing is added', () => {
    const text = changed((pod) => {
      pod.securityContext = {
        runAsUser: 1000,
        fsGroup: 2000,
        fsGroupChangePolicy: 'Always',
        seccompProfile: { type: 'Localhost', localhostProfile: 'etcd.json' },
      };
      pod.containers[0].securityContext = { capabilities: { drop: ['NET_RAW'] }, readOnlyRootFilesystem: true };
    });
    const { pod, warnings } = inject(text);

    expect(pod.securityContext).toEqual({
      runAsUser: 1000,
      fsGroup: 2000,
      fsGroupChangePolicy: 'Always',
      seccompProfile: { type: 'Localhost', localhostProfile: 'etcd.json' },
      runAsNonRoot: true,
      runAsGroup: 1000,
    });
    expect(pod.containers[0].securityContext).toEqual({
      capabilities: { drop: ['NET_RAW', 'ALL'] },
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    expect(refusals(pod)).toEqual([]);
    expect(warnings).toEqual([]);
  });

  it.each<{ what: string; change: (pod: Json) => void; field: string; value: string; unset?: string[] }>([
    { what: 'hostNetwork: true', change: (p) => (p.hostNetwork = true), field: 'hostNetwork', value: 'true' },
    { what: 'hostPID: true', change: (p) => (p.hostPID = true), field: 'hostPID', value: 'true' },
    {
      what: 'the pod runAsUser: 0',
      change: (p) => (p.securityContext = { runAsUser: 0 }),
      field: 'securityContext.runAsUser',
      value: '0',
      // prepare and the sidecar run as etcd's user, root here.
      unset: ['etcd-lifecycle-agent-prepare: runAsNonRoot', 'etcd: runAsNonRoot', 'etcd-lifecycle-agent: runAsNonRoot'],
    },
    {
      what: 'the pod runAsNonRoot: false',
      change: (p) => (p.securityContext = { runAsNonRoot: false }),
      field: 'securityContext.runAsNonRoot',
      value: 'false',
      unset: ['etcd: runAsNonRoot'],
    },
    {
      what: 'etcd runAsUser: 0',
      change: (p) => (p.containers[0].securityContext = { runAsUser: 0 }),
      field: 'containers[etcd].securityContext.runAsUser',
      value: '0',
      unset: ['etcd-lifecycle-agent-prepare: runAsNonRoot', 'etcd: runAsNonRoot', 'etcd-lifecycle-agent: runAsNonRoot'],
    },
    {
      what: 'etcd runAsNonRoot: false',
      change: (p) => (p.containers[0].securityContext = { runAsNonRoot: false }),
      field: 'containers[etcd].securityContext.runAsNonRoot',
      value: 'false',
      unset: ['etcd: runAsNonRoot'],
    },
    {
      what: 'etcd privileged: true',
      change: (p) => (p.containers[0].securityContext = { privileged: true }),
      field: 'containers[etcd].securityContext.privileged',
      value: 'true',
      unset: ['etcd: allowPrivilegeEscalation'],
    },
    {
      what: 'etcd allowPrivilegeEscalation: true',
      change: (p) => (p.containers[0].securityContext = { allowPrivilegeEscalation: true }),
      field: 'containers[etcd].securityContext.allowPrivilegeEscalation',
      value: 'true',
      unset: ['etcd: allowPrivilegeEscalation'],
    },
    {
      what: 'an added capability',
      change: (p) => (p.containers[0].securityContext = { capabilities: { add: ['NET_BIND_SERVICE', 'SYS_TIME'] } }),
      field: 'containers[etcd].securityContext.capabilities.add',
      value: '["SYS_TIME"]',
    },
    {
      what: 'seccomp Unconfined',
      change: (p) => (p.securityContext = { seccompProfile: { type: 'Unconfined' } }),
      field: 'securityContext.seccompProfile.type',
      value: 'Unconfined',
    },
    {
      what: 'a hostPath volume',
      change: (p) => (p.volumes = [{ name: 'host', hostPath: { path: '/var/lib/etcd' } }]),
      field: 'volumes[host].hostPath',
      value: '{"path":"/var/lib/etcd"}',
    },
    {
      what: 'a host port',
      change: (p) => (p.containers[0].ports[0].hostPort = 2379),
      field: 'containers[etcd].ports[client].hostPort',
      value: '2379',
    },
    {
      what: 'an unsafe sysctl',
      change: (p) => (p.securityContext = { sysctls: [{ name: 'kernel.msgmax', value: '65536' }] }),
      field: 'securityContext.sysctls[kernel.msgmax]',
      value: '65536',
    },
  ])(
    'when the input sets $what, then it is kept, one warning names spec.template.spec.$field, and the rest is filled in',
    ({ change, field, value, unset }) => {
      const { pod, warnings } = inject(changed(change), { tokenSecret: 'agent-token' });

      expect(warnings).toEqual([
        `StatefulSet demo/etcd: spec.template.spec.${field} is ${value}: Pod Security "restricted" refuses this pod (kept as the input sets it)`,
      ]);
      expect(restrictedFindings(pod)).toContainEqual({ field, value });
      // What only the input's own value stops kube-inject from setting.
      expect(missing(pod)).toEqual(unset ?? []);
    },
  );

  it('when etcd runs as root by its container, then the pod gets no runAsNonRoot (the kubelet would refuse etcd), and prepare and the sidecar run as root too, as they must to read its files', () => {
    const { pod, warnings } = inject(changed((p) => (p.containers[0].securityContext = { runAsUser: 0 })));
    const sidecar = pod.containers.find((c: Json) => c.name === 'etcd-lifecycle-agent');

    expect(pod.securityContext.runAsNonRoot).toBeUndefined();
    expect(pod.securityContext.fsGroup).toBeUndefined();
    // etcd runs as root with the pod's group (65532); so do they.
    expect(sidecar.securityContext).toMatchObject({ runAsUser: 0, runAsGroup: 65532, runAsNonRoot: false });
    expect(pod.initContainers[0].securityContext).toMatchObject({ runAsUser: 0, runAsGroup: 65532, runAsNonRoot: false });
    expect(warnings).toHaveLength(1);
  });

  it('when a container is privileged, then it gets no allowPrivilegeEscalation: false (the API server refuses the two together), and still drop ALL', () => {
    const { pod } = inject(changed((p) => (p.containers[0].securityContext = { privileged: true })));

    expect(pod.containers[0].securityContext).toEqual({ privileged: true, capabilities: { drop: ['ALL'] } });
  });

  it('when the host-network StatefulSet is injected, then the warning names hostNetwork, and the probe host kube-inject itself sets there is not warned as the input', () => {
    const warnings: string[] = [];
    kubeInject(fixture('host-network-statefulset.yaml'), { tokenSecret: 'agent-token' }, (line) => warnings.push(line));

    expect(warnings).toEqual([
      'StatefulSet kube-system/etcd: spec.template.spec.hostNetwork is true: Pod Security "restricted" refuses this pod (kept as the input sets it)',
    ]);
  });

  it('when a pod already has the sidecar, then nothing is added and nothing warned (injecting twice changes nothing)', () => {
    const warnings: string[] = [];
    const input = fixture('already-injected.yaml');

    expect(kubeInject(input, {}, (line) => warnings.push(line))).toBe(input);
    expect(warnings).toEqual([]);
  });
});

describe('etcdRunAs', () => {
  it.each<{ what: string; pod: Json; etcd: Json; uid: number; gid: number }>([
    { what: 'nothing is named', pod: {}, etcd: {}, uid: 65532, gid: 65532 },
    { what: 'the pod names a user', pod: { securityContext: { runAsUser: 1000 } }, etcd: {}, uid: 1000, gid: 1000 },
    { what: 'the pod names both', pod: { securityContext: { runAsUser: 1000, runAsGroup: 3000 } }, etcd: {}, uid: 1000, gid: 3000 },
    // etcd gets the pod's group, which kube-inject sets to the pod's user.
    {
      what: 'etcd names a user over the pod',
      pod: { securityContext: { runAsUser: 1000 } },
      etcd: { securityContext: { runAsUser: 2000 } },
      uid: 2000,
      gid: 1000,
    },
    { what: 'etcd alone names a user', pod: {}, etcd: { securityContext: { runAsUser: 2000 } }, uid: 2000, gid: 2000 },
    {
      what: 'etcd names the group only',
      pod: { securityContext: { runAsUser: 1000 } },
      etcd: { securityContext: { runAsGroup: 5 } },
      uid: 1000,
      gid: 5,
    },
    { what: 'etcd names root', pod: {}, etcd: { securityContext: { runAsUser: 0 } }, uid: 0, gid: 65532 },
    { what: 'the pod names root', pod: { securityContext: { runAsUser: 0 } }, etcd: {}, uid: 0, gid: 0 },
  ])('when $what, then etcd runs as $uid:$gid', ({ pod, etcd, uid, gid }) => {
    expect(etcdRunAs(pod, etcd)).toEqual({ uid, gid });
  });
});

describe('runKubeInject and "restricted"', () => {
  it('when the input forbids "restricted", then the YAML is printed all the same, exit 0, with one warning line per field on stderr', async () => {
    const io = kubeInjectHarness({
      'sts.yaml': changed((p) => {
        p.hostNetwork = true;
        p.containers[0].securityContext = { runAsUser: 0 };
      }),
    });

    await expect(runKubeInject(['-f', 'sts.yaml', '--token-secret', 'agent-token'], io)).resolves.toBe(0);
    expect(io.out.join('')).toContain('name: etcd-lifecycle-agent');
    expect(io.err.join('')).toBe(
      [
        'etcd-lifecycle-agent kube-inject: warning: sts.yaml: StatefulSet demo/etcd: spec.template.spec.hostNetwork is true: Pod Security "restricted" refuses this pod (kept as the input sets it)',
        'etcd-lifecycle-agent kube-inject: warning: sts.yaml: StatefulSet demo/etcd: spec.template.spec.containers[etcd].securityContext.runAsUser is 0: Pod Security "restricted" refuses this pod (kept as the input sets it)',
        '',
      ].join('\n'),
    );
  });
});

describe('the deploy kit against "restricted"', () => {
  it('when deploy/statefulset-with-agent.yaml is read, then its pod is admitted', () => {
    const [pod] = podSpecs(docs(readFileSync(join(ROOT, 'deploy', 'statefulset-with-agent.yaml'), 'utf8')));

    expect(refusals(pod)).toEqual([]);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532 });
  });

  it("when the KubeBlocks definition is read, then the containers it names are admitted (kbagent's are KubeBlocks' own)", () => {
    const [cmpd] = docs(readFileSync(join(ROOT, 'deploy', 'kubeblocks-componentdefinition.yaml'), 'utf8'));

    expect(refusals(cmpd.spec.runtime)).toEqual([]);
    expect(cmpd.spec.runtime.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532 });
  });
});
