/**
 * The sidecar container kube-inject adds, as plain data: its env (where etcd is, this pod's names
 * from the downward API), its scratch directory, probes, resources and a restricted security
 * context. No YAML here.
 */
import type { ListenPlan } from './kube-inject-host-network';
import type { ResolvedInjectOptions } from './kube-inject-options';
import { DEFAULT_RUN_AS } from './kube-inject-restricted';

/** Name of the injected container; a pod that has a container of this name counts as injected. */
export const SIDECAR_NAME = 'etcd-lifecycle-agent';

/** Where the token Secret is mounted; the Secret must hold the token under the key `token`. */
export const TOKEN_MOUNT_PATH = '/var/run/secrets/etcd-lifecycle-agent';

/** Name of the volume of the token Secret, in the pod and in the sidecar's mounts. */
export const TOKEN_VOLUME = 'etcd-lifecycle-agent-token';

/**
 * The sidecar's scratch directory, an emptyDir over its temporary directory: its root file system is
 * read-only, and a backup's verification reads the snapshot back and restores it there (about twice
 * the database's size).
 */
export const SCRATCH_VOLUME = 'etcd-lifecycle-agent-tmp';
/** Where the scratch emptyDir is mounted: the agent's temporary directory (backup/verify.ts). */
export const SCRATCH_MOUNT_PATH = '/tmp';
const LOCAL_HOST = '127.0.0.1';
const CLIENT_PORT = 2379;
const PEER_PORT = 2380;
/** The sidecar's probes' timeout: Kubernetes' default (1 s) is tight for a node under load, and these answers are local. */
const SIDECAR_PROBE_TIMEOUT_SECONDS = 2;

/** Where a pod lives, as far as its manifest tells. */
export interface PodSite {
  namespace?: string;
  /** The governing headless Service: a StatefulSet's `serviceName`, a Pod's `subdomain`. */
  serviceName?: string;
  /** `StatefulSet demo/etcd`, for messages. */
  resource: string;
}

/**
 * The sidecar's resources: the memory request at least the idle resident memory, and the limit at
 * least 1.5× the peak under the bench's /v1/health load, on every Node version the bench measures
 * (docs/benchmarks.md; test/unit/memory-budget.test.ts fails when they drift apart).
 */
export const SIDECAR_RESOURCES = { requests: { cpu: '10m', memory: '96Mi' }, limits: { memory: '200Mi' } };

/** The sidecar container as plain data, in the key order it is printed in. */
export function sidecarContainer(
  site: PodSite,
  schemes: { client: string; peer: string },
  options: ResolvedInjectOptions,
  listen: ListenPlan,
): object {
  const local = `${schemes.client}://${LOCAL_HOST}:${CLIENT_PORT}`;
  const endpoints = [local];
  let peerUrlTemplate: string | undefined;
  if (site.serviceName !== undefined) {
    const host = site.namespace === undefined ? site.serviceName : `${site.serviceName}.${site.namespace}.svc.cluster.local`;
    endpoints.unshift(`${schemes.client}://${host}:${CLIENT_PORT}`);
    // $(POD_NAMESPACE) is expanded by the kubelet: it is defined earlier in the same env list.
    peerUrlTemplate = `${schemes.peer}://{name}.${site.serviceName}.$(POD_NAMESPACE).svc.cluster.local:${PEER_PORT}`;
  }

  const env: object[] = [
    { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
    // Equal exactly in a host-network pod: the agent then requires a token (agent/config/host-network.ts).
    { name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
    { name: 'HOST_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } } },
    { name: 'ETCD_AGENT_LISTEN', value: listen.address },
    { name: 'ETCD_AGENT_MEMBER_NAME', value: '$(POD_NAME)' },
    { name: 'ETCD_AGENT_LOCAL_ENDPOINT', value: local },
    { name: 'ETCD_AGENT_ENDPOINTS', value: endpoints.join(',') },
  ];
  if (peerUrlTemplate !== undefined) env.push({ name: 'ETCD_AGENT_PEER_URL_TEMPLATE', value: peerUrlTemplate });
  if (options.tokenSecret !== undefined) {
    env.push({ name: 'ETCD_AGENT_TOKEN_FILE', value: `${TOKEN_MOUNT_PATH}/token` });
  }
  if (listen.hostNetwork) env.push({ name: 'ETCD_AGENT_HOST_NETWORK', value: 'true' });

  const probe = (path: string): object => ({
    httpGet: { path, port: 'lifecycle', ...listen.probeHost },
    timeoutSeconds: SIDECAR_PROBE_TIMEOUT_SECONDS,
  });
  return {
    name: SIDECAR_NAME,
    image: options.image,
    args: ['serve'],
    ports: [{ name: 'lifecycle', containerPort: options.port, protocol: 'TCP' }],
    env,
    volumeMounts: [
      { name: SCRATCH_VOLUME, mountPath: SCRATCH_MOUNT_PATH },
      ...(options.tokenSecret === undefined ? [] : [{ name: TOKEN_VOLUME, mountPath: TOKEN_MOUNT_PATH, readOnly: true }]),
    ],
    resources: SIDECAR_RESOURCES,
    livenessProbe: probe('/livez'),
    readinessProbe: probe('/readyz'),
    securityContext: {
      runAsNonRoot: true,
      runAsUser: DEFAULT_RUN_AS,
      // Else a kubelet runs it with gid 0.
      runAsGroup: DEFAULT_RUN_AS,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      // Pod Security "restricted" requires it of every container.
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
}
