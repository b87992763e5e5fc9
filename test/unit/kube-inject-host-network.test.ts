/**
 * kube-inject on `hostNetwork: true` pods: a token Secret is required, the agent listens on
 * loopback and is probed there, and the agent configuration it writes is one the agent accepts
 * (and refuses without a token once the pod's addresses show the node's network).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { kubeInject } from '../../agent/cli/kube-inject';
import { runKubeInject } from '../../agent/cli/kube-inject-command';
import { KubeInjectUsageError } from '../../agent/cli/kube-inject-host-network';
import { SCRATCH_MOUNT_PATH, SCRATCH_VOLUME, SIDECAR_NAME, TOKEN_MOUNT_PATH } from '../../agent/cli/kube-inject-sidecar';
import { ConfigError, loadConfig } from '../../agent/config/config';
import { kubeInjectHarness } from '../helpers/kube-inject-io';

type Json = { [key: string]: unknown };

const FIXTURES = path.join(__dirname, '..', 'fixtures', 'kube-inject');
const fixture = (name: string): string => fs.readFileSync(path.join(FIXTURES, name), 'utf8');
const HOST_STS = fixture('host-network-statefulset.yaml');

/** The pod template spec of the first document's StatefulSet. */
function podSpec(text: string): Json {
  const [doc] = parseAllDocuments(text).map((d) => d.toJS() as Json);
  return ((doc.spec as Json).template as Json).spec as Json;
}

function container(spec: Json, name: string): Json {
  const found = (spec.containers as Json[]).find((c) => c.name === name);
  if (found === undefined) throw new Error(`no container ${name}`);
  return found;
}

function envOf(c: Json): Record<string, unknown> {
  return Object.fromEntries((c.env as Json[]).map((e) => [e.name, e.value ?? e.valueFrom]));
}

const harness = kubeInjectHarness;

/**
 * The environment the kubelet would give the sidecar: literal values with `$(VAR)` expanded from
 * earlier entries, downward-API fields from `fields`.
 */
function kubeletEnv(c: Json, fields: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of c.env as Json[]) {
    const name = String(entry.name);
    if (typeof entry.value === 'string') {
      env[name] = entry.value.replace(/\$\(([A-Z_][A-Z0-9_]*)\)/g, (whole, ref: string) => env[ref] ?? whole);
    } else {
      const fieldPath = String((((entry.valueFrom as Json).fieldRef as Json) ?? {}).fieldPath);
      if (fields[fieldPath] === undefined) throw new Error(`no value for ${fieldPath}`);
      env[name] = fields[fieldPath];
    }
  }
  return env;
}

describe('kube-inject on a hostNetwork: true StatefulSet', () => {
  it('when no --token-secret is given, then kubeInject refuses with a message that says why and what to pass', () => {
    expect(() => kubeInject(HOST_STS)).toThrow(KubeInjectUsageError);
    expect(() => kubeInject(HOST_STS)).toThrow(
      /^StatefulSet kube-system\/etcd has hostNetwork: true: its loopback is the node's, .*pass --token-secret SECRET/,
    );
  });

  it('when run without --token-secret, then it exits 2, prints nothing on stdout and one reason plus the usage on stderr', async () => {
    const io = harness({ 'etcd.yaml': HOST_STS });

    const code = await runKubeInject(['-f', 'etcd.yaml'], io);

    expect(code).toBe(2);
    expect(io.out).toEqual([]);
    const lines = io.err.join('').split('\n');
    expect(lines[0]).toMatch(
      /^etcd-lifecycle-agent kube-inject: etcd\.yaml: StatefulSet kube-system\/etcd has hostNetwork: true: .*--token-secret SECRET/,
    );
    expect(lines[1]).toMatch(/^usage: etcd-lifecycle-agent kube-inject .*--token-secret SECRET.*--host-network-listen IP/);
    expect(lines.slice(2)).toEqual(["Run 'etcd-lifecycle-agent kube-inject --help' for its flags and variables.", '']);
  });

  describe('when --token-secret is given', () => {
    const output = kubeInject(HOST_STS, { tokenSecret: 'etcd-agent-token' });
    const spec = podSpec(output);
    const sidecar = container(spec, SIDECAR_NAME);
    const env = envOf(sidecar);

    it('then the token Secret is mounted and ETCD_AGENT_TOKEN_FILE points at it', () => {
      expect(env.ETCD_AGENT_TOKEN_FILE).toBe(`${TOKEN_MOUNT_PATH}/token`);
      expect(sidecar.volumeMounts).toEqual([
        { name: SCRATCH_VOLUME, mountPath: SCRATCH_MOUNT_PATH },
        { name: 'etcd-lifecycle-agent-token', mountPath: TOKEN_MOUNT_PATH, readOnly: true },
      ]);
      expect(spec.volumes).toEqual([
        { name: SCRATCH_VOLUME, emptyDir: {} },
        { name: 'etcd-lifecycle-agent-token', secret: { secretName: 'etcd-agent-token', items: [{ key: 'token', path: 'token' }] } },
      ]);
    });

    it('then the agent listens on loopback and is told it runs in the host network', () => {
      expect(env.ETCD_AGENT_LISTEN).toBe('127.0.0.1:3501');
      expect(env.ETCD_AGENT_HOST_NETWORK).toBe('true');
    });

    it('then every probe on the agent goes to 127.0.0.1, where it listens, not to the pod IP (the node address)', () => {
      expect(sidecar.livenessProbe).toEqual({ httpGet: { path: '/livez', port: 'lifecycle', host: '127.0.0.1' }, timeoutSeconds: 2 });
      expect(sidecar.readinessProbe).toEqual({ httpGet: { path: '/readyz', port: 'lifecycle', host: '127.0.0.1' }, timeoutSeconds: 2 });
      expect((container(spec, 'etcd').readinessProbe as Json).httpGet).toEqual({
        path: '/v1/health/local?voter=true',
        port: 3501,
        host: '127.0.0.1',
      });
      // No liveness through the agent, and none on etcd's own port: where etcd listens on the node is the node's business.
      expect(container(spec, 'etcd').livenessProbe).toBeUndefined();
    });

    it('then the pod keeps hostNetwork and its DNS policy, and every comment survives', () => {
      expect(spec).toMatchObject({ hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' });
      for (const comment of HOST_STS.split('\n').filter((l) => l.trim().startsWith('#'))) expect(output).toContain(comment.trim());
    });

    it('then injecting again changes nothing', () => {
      expect(kubeInject(output, { tokenSecret: 'etcd-agent-token' })).toBe(output);
      // Already injected: no token is asked for again.
      expect(kubeInject(output)).toBe(output);
    });

    it('then the agent accepts the environment the kubelet gives it: host network, loopback, the token', () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kube-inject-host-'));
      try {
        const tokenFile = path.join(dir, 'token');
        fs.writeFileSync(tokenFile, 'x\n');
        // A host-network pod: the kubelet reports the node's address as the pod IP.
        const given = kubeletEnv(sidecar, {
          'metadata.name': 'etcd-1',
          'metadata.namespace': 'kube-system',
          'status.podIP': '10.0.0.5',
          'status.hostIP': '10.0.0.5',
        });
        const { config } = loadConfig({ ...given, ETCD_AGENT_TOKEN_FILE: tokenFile });
        expect(config).toMatchObject({
          hostNetwork: true,
          listen: { host: '127.0.0.1', port: 3501 },
          memberName: 'etcd-1',
          tokenFile,
          peerUrlTemplate: 'http://{name}.etcd-headless.kube-system.svc.cluster.local:2380',
        });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  // [what, exit code, argv, ETCD_AGENT_LISTEN, probe host]
  it.each<[string, number, string[], string | undefined, string | undefined]>([
    ['--host-network-listen 0.0.0.0', 0, ['--host-network-listen', '0.0.0.0'], '0.0.0.0:3501', undefined],
    ['--host-network-listen ::1', 0, ['--host-network-listen', '::1'], '[::1]:3501', '::1'],
    ['--host-network-listen 10.0.0.5 --port 4501', 0, ['--host-network-listen=10.0.0.5', '--port', '4501'], '10.0.0.5:4501', '10.0.0.5'],
    ['--host-network-listen localhost', 2, ['--host-network-listen', 'localhost'], undefined, undefined],
  ])('when run with --token-secret and %s, then it exits %p', async (_what, code, argv, listen, probeHost) => {
    const io = harness({ 'etcd.yaml': HOST_STS });

    await expect(runKubeInject(['-f', 'etcd.yaml', '--token-secret', 'etcd-agent-token', ...argv], io)).resolves.toBe(code);

    if (code !== 0) {
      expect(io.err.join('')).toMatch(
        /^etcd-lifecycle-agent kube-inject: --host-network-listen must be an IP address, got "localhost"\nusage: /,
      );
      return;
    }
    const sidecar = container(podSpec(io.out.join('')), SIDECAR_NAME);
    expect(envOf(sidecar).ETCD_AGENT_LISTEN).toBe(listen);
    expect((sidecar.livenessProbe as { httpGet: Json }).httpGet.host).toBe(probeHost);
  });
});

describe('kube-inject on a pod-network StatefulSet', () => {
  const sidecar = container(podSpec(kubeInject(fixture('statefulset.yaml'))), SIDECAR_NAME);

  it('when injected, then it listens on all addresses, is probed on the pod IP and is not told host network', () => {
    expect(envOf(sidecar).ETCD_AGENT_LISTEN).toBe('0.0.0.0:3501');
    expect(envOf(sidecar).ETCD_AGENT_HOST_NETWORK).toBeUndefined();
    expect(sidecar.livenessProbe).toEqual({ httpGet: { path: '/livez', port: 'lifecycle' }, timeoutSeconds: 2 });
  });

  it('when injected, then POD_IP and HOST_IP come from the downward API', () => {
    expect(envOf(sidecar).POD_IP).toEqual({ fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } });
    expect(envOf(sidecar).HOST_IP).toEqual({ fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } });
  });

  // The pod switched to the node's network after injection (a kustomize overlay, or KubeBlocks'
  // Component spec.network.hostNetwork): its addresses tell the agent, which then wants a token.
  it.each<[string, string | undefined, Record<string, string>]>([
    ['its own pod IP', undefined, { 'status.podIP': '10.244.1.7', 'status.hostIP': '10.0.0.5' }],
    ['the node address as its pod IP', 'ETCD_AGENT_TOKEN_FILE', { 'status.podIP': '10.0.0.5', 'status.hostIP': '10.0.0.5' }],
  ])('when the pod runs with %s, then the agent refuses to start naming %p (undefined: it starts)', (_what, variable, fields) => {
    const given = kubeletEnv(sidecar, { 'metadata.name': 'etcd-0', 'metadata.namespace': 'demo', ...fields });
    let error: unknown;
    try {
      loadConfig(given);
    } catch (err) {
      error = err;
    }
    expect(error instanceof ConfigError ? error.variable : error).toBe(variable);
  });
});
