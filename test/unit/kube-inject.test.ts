import { readFileSync } from 'node:fs';
import path, { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { kubeInject } from '../../agent/cli/kube-inject';
import { runKubeInject } from '../../agent/cli/kube-inject-command';
import { SCRATCH_MOUNT_PATH, SCRATCH_VOLUME, SIDECAR_NAME, TOKEN_MOUNT_PATH } from '../../agent/cli/kube-inject-sidecar';
import {
  etcdStartCommand,
  FLAGS_FILE,
  PREPARE_NAME,
  START_MOUNT_PATH,
  START_NOTE_FILE,
  START_SCRIPT,
  START_VOLUME,
  STATIC_SHELL,
} from '../../agent/cli/kube-inject-prepare';
import { startScriptPath } from '../../agent/prepare/start-script';
import { kubeInjectHarness } from '../helpers/kube-inject-io';

const ROOT = join(__dirname, '..', '..');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'kube-inject');

/** Plain JSON-like data, for walking parsed manifests in tests. */
type Json = { [key: string]: unknown };

function fixture(name: string): string {
  return readFileSync(join(FIXTURES, name), 'utf8');
}

/** Every document of a YAML stream as plain data. */
function parse(text: string): unknown[] {
  return parseAllDocuments(text).map((doc) => doc.toJS() as unknown);
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The pod specs of StatefulSets and Pods in parsed documents, also inside lists. */
function podSpecs(resources: unknown[]): Json[] {
  return resources.flatMap((resource): Json[] => {
    if (!isObject(resource)) return [];
    if (resource.kind === 'StatefulSet') {
      const spec = (resource.spec as Json).template as Json;
      return [spec.spec as Json];
    }
    if (resource.kind === 'Pod') return [resource.spec as Json];
    if (resource.kind === 'List') return podSpecs(resource.items as unknown[]);
    return [];
  });
}

function containers(podSpec: Json): Json[] {
  return podSpec.containers as Json[];
}

function sidecarOf(podSpec: Json): Json {
  const sidecar = containers(podSpec).find((c) => c.name === SIDECAR_NAME);
  if (sidecar === undefined) throw new Error('no sidecar');
  return sidecar;
}

function envOf(container: Json): Record<string, unknown> {
  return Object.fromEntries((container.env as Json[]).map((e) => [e.name, e.value ?? e.valueFrom]));
}

/** The probe paths kube-inject gives the etcd container (kube-inject-etcd-probes.ts); no fixture has them of its own. */
const INJECTED_PROBES = {
  readinessProbe: ['/v1/health/local?voter=true', '/readyz'],
  livenessProbe: ['/livez', '/health?serializable=true'],
};

/** The pod-level securityContext kube-inject fills in where the input names nothing (kube-inject-restricted.ts). */
const RESTRICTED_POD: Json = {
  runAsNonRoot: true,
  runAsUser: 65532,
  runAsGroup: 65532,
  fsGroup: 65532,
  fsGroupChangePolicy: 'OnRootMismatch',
  seccompProfile: { type: 'RuntimeDefault' },
};

/** Drops from `owner.securityContext` the fields equal to RESTRICTED_POD, and the map itself when that empties it. */
function stripPodRestricted(owner: Json): void {
  const sc = owner.securityContext;
  if (!isObject(sc)) return;
  for (const [key, value] of Object.entries(RESTRICTED_POD)) if (JSON.stringify(sc[key]) === JSON.stringify(value)) delete sc[key];
  if (Object.keys(sc).length === 0) delete owner.securityContext;
}

/** Drops from a container's securityContext the `allowPrivilegeEscalation: false` and the `ALL` kube-inject adds, and what that empties. */
function stripContainerRestricted(container: Json): void {
  const sc = container.securityContext;
  if (!isObject(sc)) return;
  if (sc.allowPrivilegeEscalation === false) delete sc.allowPrivilegeEscalation;
  const caps = sc.capabilities;
  if (isObject(caps) && Array.isArray(caps.drop)) {
    caps.drop = (caps.drop as unknown[]).filter((c) => c !== 'ALL');
    if ((caps.drop as unknown[]).length === 0) delete caps.drop;
    if (Object.keys(caps).length === 0) delete sc.capabilities;
  }
  if (Object.keys(sc).length === 0) delete container.securityContext;
}

/** Undoes what kube-inject adds, in place: the sidecar, its token volume, etcd's probes, the restricted settings. */
function stripInjection(resources: unknown[]): unknown[] {
  for (const podSpec of podSpecs(resources)) {
    // Both sides: what the input already had equal to these counts as kept (kube-inject-restricted.test.ts checks the rest).
    stripPodRestricted(podSpec);
    for (const c of [...containers(podSpec), ...((podSpec.initContainers as Json[] | undefined) ?? [])]) stripContainerRestricted(c);
    podSpec.containers = containers(podSpec).filter((c) => c.name !== SIDECAR_NAME);
    for (const container of containers(podSpec)) {
      for (const [key, paths] of Object.entries(INJECTED_PROBES)) {
        const probe = container[key];
        if (isObject(probe) && isObject(probe.httpGet) && paths.includes(probe.httpGet.path as string)) delete container[key];
      }
    }
    if (Array.isArray(podSpec.volumes)) {
      podSpec.volumes = (podSpec.volumes as Json[]).filter(
        (v) => v.name !== 'etcd-lifecycle-agent-token' && v.name !== START_VOLUME && v.name !== SCRATCH_VOLUME,
      );
      if ((podSpec.volumes as Json[]).length === 0) delete podSpec.volumes;
    }
    // prepare: the init container, the shared emptyDir's mount, and etcd's wrapped command.
    if (Array.isArray(podSpec.initContainers)) {
      podSpec.initContainers = (podSpec.initContainers as Json[]).filter((c) => c.name !== PREPARE_NAME);
      if ((podSpec.initContainers as Json[]).length === 0) delete podSpec.initContainers;
    }
    for (const container of containers(podSpec)) {
      const command = container.command as string[] | undefined;
      if (command?.[0] === STATIC_SHELL) container.command = command.slice(2);
      if (Array.isArray(container.volumeMounts)) {
        container.volumeMounts = (container.volumeMounts as Json[]).filter((m) => m.name !== START_VOLUME);
      }
    }
  }
  return resources;
}

const FIXTURE_FILES = ['statefulset.yaml', 'pod.yaml', 'list.yaml', 'multi-document.yaml', 'already-injected.yaml'];

describe('kubeInject on the fixtures', () => {
  it.each(FIXTURE_FILES)('when %s is injected, then the output parses and each pod has the sidecar once', (file) => {
    const output = kubeInject(fixture(file));
    const docs = parseAllDocuments(output);
    expect(docs.flatMap((doc) => doc.errors)).toEqual([]);
    const specs = podSpecs(parse(output));
    expect(specs.length).toBeGreaterThan(0);
    for (const spec of specs) {
      expect(containers(spec).filter((c) => c.name === SIDECAR_NAME)).toHaveLength(1);
    }
  });

  it.each(FIXTURE_FILES)('when %s is injected, then nothing but the injection changes', (file) => {
    const input = fixture(file);
    const output = kubeInject(input);
    expect(stripInjection(parse(output))).toEqual(stripInjection(parse(input)));
  });

  it.each(FIXTURE_FILES)('when %s is injected, then every comment of the input survives', (file) => {
    const input = fixture(file);
    const output = kubeInject(input);
    const comments = input
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('#'));
    for (const comment of comments) expect(output).toContain(comment);
  });

  it.each(FIXTURE_FILES)('when %s is injected twice, then the second run returns its input unchanged', (file) => {
    const once = kubeInject(fixture(file));
    expect(kubeInject(once)).toBe(once);
  });

  it('when a pod already has the sidecar, then the manifest comes back byte for byte', () => {
    const input = fixture('already-injected.yaml');
    expect(kubeInject(input)).toBe(input);
  });

  it.each([
    {
      file: 'statefulset.yaml',
      pod: 0,
      endpoints: 'http://etcd-headless.demo.svc.cluster.local:2379,http://127.0.0.1:2379',
      local: 'http://127.0.0.1:2379',
      template: 'http://{name}.etcd-headless.$(POD_NAMESPACE).svc.cluster.local:2380',
    },
    {
      file: 'pod.yaml',
      pod: 0,
      endpoints: 'https://127.0.0.1:2379',
      local: 'https://127.0.0.1:2379',
      template: undefined,
    },
    {
      file: 'list.yaml',
      pod: 0,
      endpoints: 'http://etcd-headless:2379,http://127.0.0.1:2379',
      local: 'http://127.0.0.1:2379',
      template: 'http://{name}.etcd-headless.$(POD_NAMESPACE).svc.cluster.local:2380',
    },
    {
      file: 'list.yaml',
      pod: 1,
      endpoints: 'http://etcd-headless.demo.svc.cluster.local:2379,http://127.0.0.1:2379',
      local: 'http://127.0.0.1:2379',
      template: 'http://{name}.etcd-headless.$(POD_NAMESPACE).svc.cluster.local:2380',
    },
    {
      file: 'multi-document.yaml',
      pod: 0,
      endpoints: 'http://etcd.kv.svc.cluster.local:2379,http://127.0.0.1:2379',
      local: 'http://127.0.0.1:2379',
      template: 'http://{name}.etcd.$(POD_NAMESPACE).svc.cluster.local:2380',
    },
  ])('when $file (pod $pod) is injected, then the agent is told endpoints $endpoints', (row) => {
    const { file, pod, endpoints, local, template } = row;
    const env = envOf(sidecarOf(podSpecs(parse(kubeInject(fixture(file))))[pod]));
    expect(env.ETCD_AGENT_ENDPOINTS).toBe(endpoints);
    expect(env.ETCD_AGENT_LOCAL_ENDPOINT).toBe(local);
    expect(env.ETCD_AGENT_PEER_URL_TEMPLATE).toBe(template);
    expect(env.ETCD_AGENT_MEMBER_NAME).toBe('$(POD_NAME)');
  });

  it.each([
    // etcd 3.5.17: no /readyz that fails a learner yet (3.5.19), so through the agent.
    { file: 'statefulset.yaml', pod: 0, container: 'etcd', probe: '/v1/health/local?voter=true' },
    { file: 'pod.yaml', pod: 0, container: 'etcd', probe: '/health?serializable=true' },
    { file: 'list.yaml', pod: 1, container: 'server', probe: '/v1/health/local?voter=true' },
    { file: 'list.yaml', pod: 1, container: 'log-shipper', probe: undefined },
  ])('when $file is injected, then the readiness probe of container $container is at $probe', (row) => {
    const { file, pod, container, probe } = row;
    const spec = podSpecs(parse(kubeInject(fixture(file))))[pod];
    const found = containers(spec).find((c) => c.name === container) as Json;
    const readiness = found.readinessProbe as { httpGet: { path: string; port: unknown } } | undefined;
    expect(readiness?.httpGet.path).toBe(probe);
  });
});

describe('the injected sidecar', () => {
  const spec = podSpecs(parse(kubeInject(fixture('statefulset.yaml'))))[0];
  const sidecar = sidecarOf(spec);

  it("when injected with prepare, then the sidecar runs as etcd's user and group (65532 where the manifest names none, no capability), reads etcd's data read-only and writes only the start directory and its scratch directory", () => {
    expect(sidecar.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      capabilities: { drop: ['ALL'] },
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    expect(sidecar.volumeMounts).toEqual([
      { name: SCRATCH_VOLUME, mountPath: SCRATCH_MOUNT_PATH },
      { name: 'data', mountPath: '/var/run/etcd', readOnly: true },
      { name: START_VOLUME, mountPath: START_MOUNT_PATH },
    ]);
    // The scratch directory is the sidecar's alone: prepare restores beside the data directory.
    expect(spec.volumes).toContainEqual({ name: SCRATCH_VOLUME, emptyDir: {} });
    const prepare = (spec.initContainers as Json[]).find((c) => c.name === PREPARE_NAME) as Json;
    expect((prepare.volumeMounts as Json[]).map((m) => m.name)).not.toContain(SCRATCH_VOLUME);
    expect((sidecar.env as Array<{ name: string }>).map((e) => e.name)).toEqual(
      expect.arrayContaining(['ETCD_AGENT_DATA_DIR', 'ETCD_AGENT_PREPARE_FLAGS_FILE']),
    );
  });

  it.each([
    ['the etcd container', 'containers[0]', 1001, 1002, 1002],
    ['the pod', 'pod', 1001, undefined, 1001],
  ])(
    "when %s names etcd's user, then the sidecar and prepare run as that user, non-root, and its group (else the uid's number)",
    (_where, at, uid, gid, group) => {
      const doc = parse(fixture('statefulset.yaml'))[0] as Json;
      const pod = ((doc.spec as Json).template as Json).spec as Json;
      const security = { runAsUser: uid, ...(gid === undefined ? {} : { runAsGroup: gid }) };
      if (at === 'pod') pod.securityContext = security;
      else ((pod.containers as Json[])[0] as Json).securityContext = security;
      const injected = podSpecs(parse(kubeInject(stringify(doc))))[0];
      const expected = { runAsUser: uid, runAsGroup: group };
      expect(sidecarOf(injected).securityContext).toMatchObject({ ...expected, runAsNonRoot: true });
      expect(((injected.initContainers as Json[]).find((c) => c.name === PREPARE_NAME) as Json).securityContext).toMatchObject({
        ...expected,
        runAsNonRoot: true,
      });
      // etcd's volume belongs to etcd's group.
      expect(injected.securityContext).toMatchObject({ fsGroup: group, fsGroupChangePolicy: 'OnRootMismatch' });
    },
  );

  it('when injected where prepare cannot be (no Service to derive peer URLs from), then it serves the lifecycle port with hardened defaults, non-root', () => {
    const plain = sidecarOf(podSpecs(parse(kubeInject(fixture('pod.yaml'))))[0]);
    expect(plain).toMatchObject({
      name: 'etcd-lifecycle-agent',
      image: 'etcd-lifecycle-agent:0.1.0',
      args: ['serve'],
      ports: [{ name: 'lifecycle', containerPort: 3501 }],
      livenessProbe: { httpGet: { path: '/livez', port: 'lifecycle' }, timeoutSeconds: 2 },
      readinessProbe: { httpGet: { path: '/readyz', port: 'lifecycle' }, timeoutSeconds: 2 },
      resources: { requests: { cpu: '10m', memory: '96Mi' }, limits: { memory: '200Mi' } },
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 65532,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      },
    });
    // Its only mount: the scratch directory over its temporary directory, as its root file system is read-only.
    expect(plain.volumeMounts).toEqual([{ name: SCRATCH_VOLUME, mountPath: SCRATCH_MOUNT_PATH }]);
  });

  it('when the etcd container gets its readiness probe, then its timeout outlasts one health observation (max age 1 s)', () => {
    const etcd = containers(spec).find((c) => c.name === 'etcd') as Json;
    expect(etcd.readinessProbe).toMatchObject({ httpGet: { path: '/v1/health/local?voter=true' }, timeoutSeconds: 3 });
  });

  it('when injected, then POD_NAME and POD_NAMESPACE come from the downward API before they are used', () => {
    const names = (sidecar.env as Json[]).map((e) => e.name);
    expect(names.slice(0, 2)).toEqual(['POD_NAME', 'POD_NAMESPACE']);
    expect(envOf(sidecar).POD_NAME).toEqual({ fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } });
    expect(envOf(sidecar).POD_NAMESPACE).toEqual({ fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } });
  });

  it('when injected with an image, a port and a token Secret, then all three are wired in', () => {
    const options = { image: 'registry.example.com/agent:1.2.3', port: 4501, tokenSecret: 'agent-token' };
    const output = kubeInject(fixture('pod.yaml'), options);
    const podSpec = podSpecs(parse(output))[0];
    const injected = sidecarOf(podSpec);
    expect(injected.image).toBe('registry.example.com/agent:1.2.3');
    expect(injected.ports).toEqual([{ name: 'lifecycle', containerPort: 4501, protocol: 'TCP' }]);
    expect(envOf(injected).ETCD_AGENT_LISTEN).toBe('0.0.0.0:4501');
    expect(envOf(injected).ETCD_AGENT_TOKEN_FILE).toBe(`${TOKEN_MOUNT_PATH}/token`);
    expect(injected.volumeMounts).toEqual([
      { name: SCRATCH_VOLUME, mountPath: SCRATCH_MOUNT_PATH },
      { name: 'etcd-lifecycle-agent-token', mountPath: TOKEN_MOUNT_PATH, readOnly: true },
    ]);
    expect(podSpec.volumes).toContainEqual({
      name: 'etcd-lifecycle-agent-token',
      secret: { secretName: 'agent-token', items: [{ key: 'token', path: 'token' }] },
    });
  });
});

describe('the injected prepare step', () => {
  const spec = podSpecs(parse(kubeInject(fixture('statefulset.yaml'))))[0];
  const init = (spec.initContainers as Json[]).find((c) => c.name === PREPARE_NAME) as Json;
  const etcd = containers(spec).find((c) => c.name === 'etcd') as Json;

  it('when a StatefulSet names etcd, its data directory and a Service, then an init container runs prepare with what etcd was told', () => {
    expect(init).toMatchObject({
      image: 'etcd-lifecycle-agent:0.1.0',
      command: ['/bin/sh', '-c', expect.stringContaining('exec etcd-lifecycle-agent prepare')],
    });
    const env = envOf(init);
    expect(env).toMatchObject({
      ETCD_AGENT_MEMBER_NAME: '$(POD_NAME)',
      ETCD_AGENT_DATA_DIR: '/var/run/etcd/default.etcd',
      ETCD_AGENT_INITIAL_CLUSTER: expect.stringMatching(/^etcd-0=http:\/\/etcd-0\.etcd-headless\.demo\.svc\.cluster\.local:2380,etcd-1=/),
      ETCD_AGENT_INITIAL_CLUSTER_TOKEN: 'etcd-demo',
      ETCD_AGENT_PREPARE_FLAGS_FILE: FLAGS_FILE,
      ETCD_AGENT_START_NOTE_FILE: START_NOTE_FILE,
      ETCD_AGENT_LISTEN: '0.0.0.0:3501',
      ETCD_AGENT_PEER_URL_TEMPLATE: 'http://{name}.etcd-headless.$(POD_NAMESPACE).svc.cluster.local:2380',
    });
    expect((init.volumeMounts as Json[]).map((m) => m.mountPath)).toEqual(['/var/run/etcd', START_MOUNT_PATH]);
  });

  it('when injected with a token Secret, then prepare mounts the token its configuration names, as the sidecar does', () => {
    const withToken = podSpecs(parse(kubeInject(fixture('statefulset.yaml'), { tokenSecret: 'agent-token' })))[0];
    const prepare = (withToken.initContainers as Json[]).find((c) => c.name === PREPARE_NAME) as Json;

    expect(envOf(prepare).ETCD_AGENT_TOKEN_FILE).toBe(`${TOKEN_MOUNT_PATH}/token`);
    expect(prepare.volumeMounts).toContainEqual({ name: 'etcd-lifecycle-agent-token', mountPath: TOKEN_MOUNT_PATH, readOnly: true });
    expect(withToken.volumes).toContainEqual(expect.objectContaining({ name: 'etcd-lifecycle-agent-token' }));
  });

  it("when injected, then etcd's command is one line: the static shell running the start program prepare installs, with etcd's binary and its arguments as they were", () => {
    expect(etcd.command).toEqual([STATIC_SHELL, START_SCRIPT, '/usr/local/bin/etcd']);
    expect(START_SCRIPT).toBe(`${START_MOUNT_PATH}/etcd-start`);
    expect(kubeInject(fixture('statefulset.yaml'))).toContain(`command: [${STATIC_SHELL}, ${START_SCRIPT}, /usr/local/bin/etcd]\n`);
    expect(etcd.args).toEqual((containers(podSpecs(parse(fixture('statefulset.yaml')))[0]).find((c) => c.name === 'etcd') as Json).args);
    expect(etcd.volumeMounts).toContainEqual({ name: START_VOLUME, mountPath: START_MOUNT_PATH });
    expect(spec.volumes).toContainEqual({ name: START_VOLUME, emptyDir: {} });
    // prepare installs the script beside the flags file it writes.
    expect(path.dirname(FLAGS_FILE)).toBe(START_MOUNT_PATH);
  });

  it("when injected, then the sidecar reads the note etcd's command leaves when it refuses to start etcd (the start volume, writable for the recovery's control files)", () => {
    const sidecar = containers(spec).find((c) => c.name === SIDECAR_NAME) as Json;
    expect(envOf(sidecar).ETCD_AGENT_START_NOTE_FILE).toBe(START_NOTE_FILE);
    expect((sidecar.volumeMounts as Json[]).filter((m) => m.name === START_VOLUME)).toEqual([
      { name: START_VOLUME, mountPath: START_MOUNT_PATH },
    ]);
    expect(START_NOTE_FILE.startsWith(`${START_MOUNT_PATH}/`)).toBe(true);
  });

  it.each([
    ['pod.yaml', 0, 'no Service to derive peer URLs from'],
    ['multi-document.yaml', 0, 'etcd reads a --config-file, which would ignore added flags'],
  ])('when %s (pod %s) is injected, then no prepare is added: %s', (file, pod) => {
    const injected = podSpecs(parse(kubeInject(fixture(file))))[pod];
    expect(injected.initContainers).toBeUndefined();
    expect(JSON.stringify(injected)).not.toContain(STATIC_SHELL);
  });
});

describe('kubeInject on other input', () => {
  it.each([
    { what: 'a ConfigMap', text: 'kind: ConfigMap\nmetadata:\n  name: x   # odd   spacing\ndata: {}\n' },
    { what: 'a Deployment', text: 'kind: Deployment\nspec:\n  template:\n    spec:\n      containers: [{name: etcd}]\n' },
    { what: 'only comments', text: '# nothing here\n' },
    { what: 'an empty file', text: '' },
  ])('when given $what, then it comes back unchanged', ({ text }) => {
    expect(kubeInject(text)).toBe(text);
  });

  it.each([
    { what: 'broken YAML', text: 'kind: Pod\nspec: [1\nmetadata: {', message: /^invalid YAML: / },
    { what: 'a bad port', text: 'kind: Pod\n', options: { port: 70000 }, message: /port/ },
    { what: 'a bad Secret name', text: 'kind: Pod\n', options: { tokenSecret: 'Not_A_Name' }, message: /Secret/ },
  ])('when given $what, then it throws a one-line message', ({ text, options, message }) => {
    expect(() => kubeInject(text, options)).toThrow(message);
    try {
      kubeInject(text, options);
    } catch (error) {
      expect((error as Error).message).not.toContain('\n');
    }
  });

  it('when a sequence is indented under its key, then the added ones are too', () => {
    const output = kubeInject(fixture('multi-document.yaml'));
    expect(output).toContain('          args:\n            - serve\n');
  });
});

describe('deploy/', () => {
  it('when deploy/statefulset.yaml is injected, then the result is deploy/statefulset-with-agent.yaml', () => {
    const plain = readFileSync(join(ROOT, 'deploy', 'statefulset.yaml'), 'utf8');
    const withAgent = readFileSync(join(ROOT, 'deploy', 'statefulset-with-agent.yaml'), 'utf8');
    expect(kubeInject(plain)).toBe(withAgent);
  });

  it("when the kit, kube-inject's output and the KubeBlocks definition are read, then all three start etcd with one command over the same paths, and no manifest carries a copy of the start script", () => {
    const kit = podSpecs(parse(readFileSync(join(ROOT, 'deploy', 'statefulset-with-agent.yaml'), 'utf8')))[0];
    const injected = podSpecs(parse(kubeInject(fixture('statefulset.yaml'))))[0];
    const [cmpd] = parse(readFileSync(join(ROOT, 'deploy', 'kubeblocks-componentdefinition.yaml'), 'utf8')) as Json[];
    const kubeblocks = (cmpd.spec as Json).runtime as Json;
    for (const pod of [kit, injected, kubeblocks]) {
      const etcd = containers(pod).find((c) => c.name === 'etcd') as Json;
      const init = (pod.initContainers as Json[]).find((c) => c.name === PREPARE_NAME) as Json;
      expect(etcd.command).toEqual(etcdStartCommand(['/usr/local/bin/etcd']));
      expect(etcd.command).toEqual([STATIC_SHELL, START_SCRIPT, '/usr/local/bin/etcd']);
      // prepare installs the script beside the flags file it is told of, for the data directory etcd is given.
      expect(startScriptPath(envOf(init).ETCD_AGENT_PREPARE_FLAGS_FILE as string)).toBe(START_SCRIPT);
      expect(etcd.args).toContain(`--data-dir=${envOf(init).ETCD_AGENT_DATA_DIR as string}`);
      expect(init.command).toEqual(['/bin/sh', '-c', `cp /bin/busybox ${STATIC_SHELL} && exec etcd-lifecycle-agent prepare`]);
      for (const c of [etcd, init, sidecarOf(pod)]) {
        expect(c.volumeMounts).toContainEqual({ name: START_VOLUME, mountPath: START_MOUNT_PATH });
      }
    }
    // A line of the script itself appears in no manifest.
    for (const file of ['statefulset.yaml', 'statefulset-with-agent.yaml', 'kubeblocks-componentdefinition.yaml']) {
      expect([file, readFileSync(join(ROOT, 'deploy', file), 'utf8').includes('etcd-restart')]).toEqual([file, false]);
    }
  });

  it("when the kit, kube-inject's output and the KubeBlocks definition are read, then each sidecar, its root file system read-only, has an emptyDir over its temporary directory for a backup's verification", () => {
    const kit = podSpecs(parse(readFileSync(join(ROOT, 'deploy', 'statefulset-with-agent.yaml'), 'utf8')))[0];
    const injected = podSpecs(parse(kubeInject(fixture('statefulset.yaml'))))[0];
    const [cmpd] = parse(readFileSync(join(ROOT, 'deploy', 'kubeblocks-componentdefinition.yaml'), 'utf8')) as Json[];
    const kubeblocks = (cmpd.spec as Json).runtime as Json;
    for (const [name, pod] of Object.entries({ kit, injected, kubeblocks })) {
      const sidecar = sidecarOf(pod);
      expect({ name, readOnly: (sidecar.securityContext as Json).readOnlyRootFilesystem }).toEqual({ name, readOnly: true });
      // The agent's temporary directory (os.tmpdir(), TMPDIR unset) is where verify.ts makes its scratch directory.
      expect({ name, mounts: sidecar.volumeMounts }).toEqual({
        name,
        mounts: expect.arrayContaining([{ name: SCRATCH_VOLUME, mountPath: SCRATCH_MOUNT_PATH }]),
      });
      expect({ name, volumes: pod.volumes }).toEqual({ name, volumes: expect.arrayContaining([{ name: SCRATCH_VOLUME, emptyDir: {} }]) });
      expect({ name, tmpdir: envOf(sidecar).TMPDIR }).toEqual({ name, tmpdir: undefined });
    }
  });

  it('when the KubeBlocks ComponentDefinition is read, then its four lifecycle actions are HTTP actions', () => {
    const [cmpd] = parse(readFileSync(join(ROOT, 'deploy', 'kubeblocks-componentdefinition.yaml'), 'utf8')) as Json[];
    expect(cmpd).toMatchObject({ apiVersion: 'apps.kubeblocks.io/v1', kind: 'ComponentDefinition' });
    const actions = (cmpd.spec as Json).lifecycleActions as Json;
    for (const name of ['memberJoin', 'memberLeave', 'roleProbe', 'switchover']) {
      expect((actions[name] as Json).http).toMatchObject({ port: '3501', path: expect.stringMatching(/^\/v1\//) });
      expect((actions[name] as Json).exec).toBeUndefined();
    }
  });
});

describe('runKubeInject', () => {
  const harness = kubeInjectHarness;

  const files = {
    'sts.yaml': fixture('statefulset.yaml'),
    '-': fixture('pod.yaml'),
    'bad.yaml': 'kind: Pod\nspec: [1\n',
  };

  it.each([
    { argv: ['-f', 'sts.yaml'], code: 0, stdout: /name: etcd-lifecycle-agent/, stderr: /^$/ },
    { argv: ['kube-inject', '--filename=sts.yaml', '--image', 'x/a:2'], code: 0, stdout: /image: x\/a:2/, stderr: /^$/ },
    { argv: ['-f', '-', '--token-secret', 'agent-token'], code: 0, stdout: /secretName: agent-token/, stderr: /^$/ },
    { argv: ['--help'], code: 0, stdout: /^usage: /, stderr: /^$/ },
    { argv: [], code: 2, stdout: /^$/, stderr: /missing -f FILE/ },
    { argv: ['-f'], code: 2, stdout: /^$/, stderr: /usage: / },
    { argv: ['-f', 'sts.yaml', '--colour'], code: 2, stdout: /^$/, stderr: /usage: / },
    { argv: ['-f', 'sts.yaml', '--port', 'http'], code: 2, stdout: /^$/, stderr: /--port/ },
    {
      argv: ['-f', 'nope.yaml'],
      code: 1,
      stdout: /^$/,
      stderr: /^etcd-lifecycle-agent kube-inject: cannot read nope\.yaml: ENOENT[^\n]*\n$/,
    },
    { argv: ['-f', 'bad.yaml'], code: 1, stdout: /^$/, stderr: /^etcd-lifecycle-agent kube-inject: bad\.yaml: invalid YAML: [^\n]*\n$/ },
  ])('when run with $argv, then it exits $code', async ({ argv, code, stdout, stderr }) => {
    const io = harness(files);
    await expect(runKubeInject(argv, io)).resolves.toBe(code);
    expect(io.out.join('')).toMatch(stdout);
    expect(io.err.join('')).toMatch(stderr);
  });

  it('when run without a readFile of its own, then it reads the file from disk', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const io = { stdout: (s: string) => out.push(s), stderr: (s: string) => err.push(s) };
    const code = await runKubeInject(['-f', join(FIXTURES, 'pod.yaml')], io);
    expect({ code, err }).toEqual({ code: 0, err: [] });
    expect(out.join('')).toBe(kubeInject(fixture('pod.yaml')));
  });

  it('when run on a file, then it prints exactly what kubeInject returns', async () => {
    const io = harness(files);
    await runKubeInject(['-f', 'sts.yaml'], io);
    expect(io.out.join('')).toBe(kubeInject(files['sts.yaml']));
  });
});
