/**
 * kube-inject and Pod Security "restricted": what it sets so that the pod it prints is admitted
 * there, and what in the input stops that. Invariant: a value the input sets is never changed; a
 * field the input leaves out is filled in; a value the input sets that "restricted" refuses is kept
 * and named, one warning each.
 *
 * The rules are those of Kubernetes' Pod Security admission (k8s.io/pod-security-admission, 1.34):
 * - the pod: no `hostNetwork`, `hostPID`, `hostIPC`; only configMap, csi, downwardAPI, emptyDir,
 *   ephemeral, image, persistentVolumeClaim, projected and secret volumes; safe sysctls only;
 * - every container (init and ephemeral ones too): not privileged, `allowPrivilegeEscalation:
 *   false`, capabilities `drop: [ALL]` and none added but NET_BIND_SERVICE, no host ports, no probe
 *   or lifecycle `host`, the default /proc mount;
 * - the pod or every container: `runAsNonRoot: true`, never `runAsUser: 0`, a seccomp profile of
 *   RuntimeDefault or Localhost; no Unconfined AppArmor profile and only container SELinux types.
 *
 * What kube-inject fills in: at the pod level `runAsNonRoot: true`, `runAsUser` and `runAsGroup`
 * (etcd's user, else 65532, the agent image's user), `fsGroup` (etcd's group, so that etcd can
 * write its volume and take over files a root etcd wrote) with `fsGroupChangePolicy:
 * OnRootMismatch`, `seccompProfile: RuntimeDefault`; in every container `allowPrivilegeEscalation:
 * false` and `capabilities.drop: [ALL]`. This module edits through the `yaml` Document API, so
 * comments and key order survive; the findings are pure, over plain data.
 */
import { Document, isMap, isSeq, YAMLMap, YAMLSeq } from 'yaml';

/** The user and group kube-inject runs a pod as when its manifest names none: the agent image's (Dockerfile `USER 65532:65532`), the conventional "nonroot". */
export const DEFAULT_RUN_AS = 65532;

/** A uid and a gid. */
export interface RunAs {
  uid: number;
  gid: number;
}

/** A value in the input that Pod Security "restricted" refuses: the field (below the pod spec) and its value. */
export interface RestrictedFinding {
  field: string;
  value: string;
}

type Json = Record<string, unknown>;

/** The inline volume sources "restricted" allows (check_restrictedVolumes.go). */
const ALLOWED_VOLUMES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'image',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);
/** The sysctls "baseline" allows (check_sysctls.go). */
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
  'net.ipv4.tcp_rmem',
  'net.ipv4.tcp_wmem',
]);
/** The SELinux types "baseline" allows (check_seLinuxOptions.go). */
const SELINUX_TYPES = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']);
const CONTAINER_LISTS = ['initContainers', 'containers', 'ephemeralContainers'];
const PROBES = ['livenessProbe', 'readinessProbe', 'startupProbe'];

/**
 * What in `podSpec` (plain data) Pod Security "restricted" refuses whatever kube-inject adds, in
 * the order of the pod spec: the pod's own fields, its volumes, then each container's.
 */
export function restrictedFindings(podSpec: Json): RestrictedFinding[] {
  const found: RestrictedFinding[] = [];
  const add = (field: string, value: unknown): void => {
    found.push({ field, value: typeof value === 'string' ? value : JSON.stringify(value) });
  };
  for (const key of ['hostNetwork', 'hostPID', 'hostIPC']) if (podSpec[key] === true) add(key, true);
  securityFindings(object(podSpec.securityContext), 'securityContext', add, true);
  for (const volume of list(podSpec.volumes)) {
    for (const source of Object.keys(volume)) {
      if (source !== 'name' && !ALLOWED_VOLUMES.has(source)) add(`volumes[${String(volume.name)}].${source}`, volume[source]);
    }
  }
  for (const key of CONTAINER_LISTS) {
    for (const container of list(podSpec[key])) {
      const at = `${key}[${String(container.name)}]`;
      securityFindings(object(container.securityContext), `${at}.securityContext`, add, false);
      for (const port of list(container.ports)) {
        if (typeof port.hostPort === 'number' && port.hostPort !== 0)
          add(`${at}.ports[${String(port.name ?? port.containerPort)}].hostPort`, port.hostPort);
      }
      const handlers = [
        ...PROBES.map((p) => [p, object(container[p])] as const),
        ...['postStart', 'preStop'].map((h) => [`lifecycle.${h}`, object(object(container.lifecycle)[h])] as const),
      ];
      for (const [name, handler] of handlers) {
        for (const kind of ['httpGet', 'tcpSocket']) {
          const host = object(handler[kind]).host;
          if (typeof host === 'string' && host !== '') add(`${at}.${name}.${kind}.host`, host);
        }
      }
    }
  }
  return found;
}

/** The findings of one securityContext (the pod's when `pod`). */
function securityFindings(sc: Json, at: string, add: (field: string, value: unknown) => void, pod: boolean): void {
  if (!pod) {
    if (sc.privileged === true) add(`${at}.privileged`, true);
    if (sc.allowPrivilegeEscalation === true) add(`${at}.allowPrivilegeEscalation`, true);
    const added = object(sc.capabilities).add;
    const extra = Array.isArray(added) ? added.filter((c) => c !== 'NET_BIND_SERVICE') : [];
    if (extra.length > 0) add(`${at}.capabilities.add`, extra);
    if (typeof sc.procMount === 'string' && sc.procMount !== 'Default') add(`${at}.procMount`, sc.procMount);
  }
  if (sc.runAsNonRoot === false) add(`${at}.runAsNonRoot`, false);
  if (sc.runAsUser === 0) add(`${at}.runAsUser`, 0);
  const seccomp = object(sc.seccompProfile).type;
  if (typeof seccomp === 'string' && seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') add(`${at}.seccompProfile.type`, seccomp);
  if (object(sc.appArmorProfile).type === 'Unconfined') add(`${at}.appArmorProfile.type`, 'Unconfined');
  const selinux = object(sc.seLinuxOptions);
  if (typeof selinux.type === 'string' && !SELINUX_TYPES.has(selinux.type)) add(`${at}.seLinuxOptions.type`, selinux.type);
  for (const key of ['user', 'role'])
    if (typeof selinux[key] === 'string' && selinux[key] !== '') add(`${at}.seLinuxOptions.${key}`, selinux[key]);
  if (object(sc.windowsOptions).hostProcess === true) add(`${at}.windowsOptions.hostProcess`, true);
  if (pod) {
    for (const sysctl of list(sc.sysctls))
      if (!SAFE_SYSCTLS.has(String(sysctl.name))) add(`${at}.sysctls[${String(sysctl.name)}]`, sysctl.value ?? '');
  }
}

/**
 * The user and group etcd runs as, and so prepare and the sidecar beside it (they read and move its
 * files): the etcd container's `runAsUser`, else the pod's, else DEFAULT_RUN_AS (which kube-inject
 * then sets on the pod); the etcd container's `runAsGroup`, else the pod's, else the group
 * kube-inject gives the pod (podRunAs).
 */
export function etcdRunAs(podSpec: Json, etcd: Json | undefined): RunAs {
  const uid = id(object(etcd?.securityContext).runAsUser) ?? id(object(podSpec.securityContext).runAsUser) ?? DEFAULT_RUN_AS;
  const gid = id(object(etcd?.securityContext).runAsGroup) ?? id(object(podSpec.securityContext).runAsGroup) ?? podRunAs(podSpec, uid);
  return { uid, gid };
}

/**
 * The pod's user, as the pod names it, else etcd's (`etcdUid`) unless that is root, else
 * DEFAULT_RUN_AS; it is also the pod's group where the pod names none (a kubelet gives gid 0 to a
 * container whose user names no group).
 */
function podRunAs(podSpec: Json, etcdUid: number): number {
  return id(object(podSpec.securityContext).runAsUser) ?? (etcdUid !== 0 ? etcdUid : DEFAULT_RUN_AS);
}

/**
 * Fills in the pod-level securityContext of `podSpec` (see the module comment): `etcd` is whom etcd
 * runs as (etcdRunAs). `runAsNonRoot` is left out when the pod or one of its containers names uid 0
 * (the kubelet would refuse to start it), and `fsGroup` when etcd runs as root (it needs no group to
 * write its volume).
 */
export function restrictPod(doc: Document, podSpec: YAMLMap, etcd: RunAs): void {
  const plain = podSpec.toJSON() as Json;
  const podUid = podRunAs(plain, etcd.uid);
  const sc = mapAt(doc, podSpec, 'securityContext');
  const namesRoot = podUid === 0 || CONTAINER_LISTS.some((key) => list(plain[key]).some((c) => object(c.securityContext).runAsUser === 0));
  if (!sc.has('runAsNonRoot') && !namesRoot) sc.set('runAsNonRoot', true);
  if (!sc.has('runAsUser')) sc.set('runAsUser', podUid);
  if (!sc.has('runAsGroup')) sc.set('runAsGroup', podUid);
  if (!sc.has('fsGroup') && etcd.uid !== 0) {
    sc.set('fsGroup', etcd.gid);
    if (!sc.has('fsGroupChangePolicy')) sc.set('fsGroupChangePolicy', 'OnRootMismatch');
  }
  if (!sc.has('seccompProfile')) sc.set('seccompProfile', doc.createNode({ type: 'RuntimeDefault' }));
}

/**
 * Fills in each container's `allowPrivilegeEscalation: false` (not beside `privileged: true` or an
 * added SYS_ADMIN, which the API server refuses with it) and `capabilities.drop: [ALL]` (ALL added
 * to a drop list that lacks it), in every container list of `podSpec`.
 */
export function restrictContainers(doc: Document, podSpec: YAMLMap): void {
  for (const key of CONTAINER_LISTS) {
    const containers = podSpec.get(key);
    if (!isSeq(containers)) continue;
    for (const container of containers.items) {
      if (!isMap(container)) continue;
      const sc = mapAt(doc, container, 'securityContext');
      const caps = sc.get('capabilities');
      const added = isMap(caps) && isSeq(caps.get('add')) ? (caps.get('add') as YAMLSeq).toJSON() : [];
      const sysAdmin = (added as unknown[]).some((c) => c === 'SYS_ADMIN' || c === 'CAP_SYS_ADMIN');
      if (!sc.has('allowPrivilegeEscalation') && sc.get('privileged') !== true && !sysAdmin) sc.set('allowPrivilegeEscalation', false);
      const capabilities = mapAt(doc, sc, 'capabilities');
      const drop = capabilities.get('drop');
      if (!isSeq(drop)) capabilities.set('drop', doc.createNode(['ALL']));
      else if (!drop.items.some((c) => (c as { value?: unknown }).value === 'ALL' || c === 'ALL')) drop.add(doc.createNode('ALL'));
    }
  }
}

/** The map at `key` of `map`, set to a new empty one when there is none. */
function mapAt(doc: Document, map: YAMLMap, key: string): YAMLMap {
  const found = map.get(key);
  if (isMap(found)) return found;
  const created = doc.createNode({}) as YAMLMap;
  map.set(key, created);
  return created;
}

/** `value` when it is a uid or gid (a whole number, 0 or more). */
function id(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

function object(value: unknown): Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

function list(value: unknown): Json[] {
  return Array.isArray(value) ? value.map(object) : [];
}
