/**
 * The `prepare` part of kube-inject: an init container that decides how the
 * pod's etcd starts (`etcd-lifecycle-agent prepare`), and an etcd command that
 * sources its decision. Invariant: it is added only where it can work — the
 * etcd container names its binary (`command`), its data directory
 * (`--data-dir`) sits on one of its volumes, it takes no `--config-file`
 * (etcd would then ignore the flags prepare adds), and peer URLs can be
 * derived (a governing Service) — and otherwise nothing here changes the pod.
 *
 * The official etcd images from 3.5.7 on have no shell, so the init container
 * (the agent's image) also copies Debian's static busybox into the shared
 * emptyDir as `sh`, and prepare installs the start program beside the flags file
 * (prepare/start-script.ts): the etcd container's command names both in one line,
 * `[sh, etcd-start, <etcd's binary>]`, and its `args` stay as they were (the flags
 * prepare wrote are appended to them: Go's flag package keeps the last). The
 * script first checks etcd's version against the versions the data directory
 * records, which the flags file carries (prepare/version-gate.ts); a refusal is
 * also written to START_NOTE_FILE, in the same emptyDir, so the sidecar's health
 * names it.
 */
import { Document, isMap, isScalar, isSeq, YAMLMap, YAMLSeq } from 'yaml';
import { START_SCRIPT_NAME } from '../prepare/start-script';
import type { RunAs } from './kube-inject-restricted';
import { envValue, seqAt, stringsOf } from './yaml-nodes';

/** Name of the init container. */
export const PREPARE_NAME = 'etcd-lifecycle-agent-prepare';
/** The emptyDir shared by the init container and etcd: the flags file and the static shell. */
export const START_VOLUME = 'etcd-lifecycle-agent-start';
/** Where that emptyDir is mounted in both containers. */
export const START_MOUNT_PATH = '/var/run/etcd-lifecycle-agent';
/** The flags file prepare writes and etcd's command sources. */
export const FLAGS_FILE = `${START_MOUNT_PATH}/etcd-flags.sh`;
/** The static shell the etcd command runs. */
export const STATIC_SHELL = `${START_MOUNT_PATH}/sh`;
/** The start program prepare installs there, which the static shell runs (prepare/start-script.ts). */
export const START_SCRIPT = `${START_MOUNT_PATH}/${START_SCRIPT_NAME}`;
/** Where the etcd command leaves the line with which it refused to start etcd (beside the flags file); the sidecar reads it. */
export const START_NOTE_FILE = `${START_MOUNT_PATH}/etcd-start-note`;

/** The etcd container's command: the static shell running the start program, then the words of etcd's own command (its binary first). */
export function etcdStartCommand(commandWords: string[]): string[] {
  return [STATIC_SHELL, START_SCRIPT, ...commandWords];
}

/** What the init container shares with the sidecar. */
export interface PrepareInjection {
  image: string;
  port: number;
  /** The sidecar's env entries (POD_NAME, POD_NAMESPACE, endpoints, template …), in order. */
  agentEnv: object[];
  /** The sidecar's volume mounts (the token Secret's), which the agent's configuration reads too. */
  agentMounts: object[];
  resources: object;
  /** Whom etcd runs as (kube-inject-restricted.ts `etcdRunAs`): prepare and the sidecar run as the same. */
  runAs: RunAs;
}

/**
 * Adds prepare to `podSpec` when `etcd` allows it (see the module comment); true when added. The
 * `sidecar` then gets what restarting and preparing etcd again takes (the recovery, a survivor's
 * rejoin): prepare's settings, the start directory (writable: the hold, restart and one-shot files)
 * and etcd's data volume read-only, to read the write-ahead log of a stopped member (every change to
 * the data is made by etcd's own start script). It runs as etcd's user and group, which the init
 * container does too: etcd's files are that user's, mode 0700 and 0600, so no other user can read
 * them, and a capability given to a non-root container has no effect in Kubernetes.
 */
export function injectPrepare(doc: Document, podSpec: YAMLMap, etcd: YAMLMap, inject: PrepareInjection, sidecar?: YAMLMap): boolean {
  const command = etcd.get('command');
  if (!isSeq(command) || command.items.length === 0) return false;
  const commandWords = stringsOf(command);
  if (commandWords.length !== command.items.length) return false;
  const words = [...commandWords, ...stringsOf(etcd.get('args'))];
  if (words.some((w) => w.startsWith('--config-file'))) return false;
  const dataDir = flagValue(words, 'data-dir') ?? envValue(etcd, 'ETCD_DATA_DIR');
  const hasTemplate = inject.agentEnv.some((e) => (e as { name?: string }).name === 'ETCD_AGENT_PEER_URL_TEMPLATE');
  if (dataDir === undefined || !hasTemplate) return false;
  const mounts = isSeq(etcd.get('volumeMounts')) ? (etcd.get('volumeMounts') as YAMLSeq).items.filter(isMap) : [];
  const dataMounts = mounts.filter((m) => {
    const at = m.get('mountPath');
    return typeof at === 'string' && dataDir.startsWith(`${at.replace(/\/+$/, '')}/`);
  });
  if (dataMounts.length === 0) return false;

  const initialCluster = flagValue(words, 'initial-cluster') ?? envValue(etcd, 'ETCD_INITIAL_CLUSTER');
  const token = flagValue(words, 'initial-cluster-token') ?? envValue(etcd, 'ETCD_INITIAL_CLUSTER_TOKEN');
  const env: object[] = [
    ...inject.agentEnv.filter((e) => (e as { name?: string }).name !== 'ETCD_AGENT_LISTEN'),
    // Peers' prepare steps read this pod's answer on the agent port while it waits.
    { name: 'ETCD_AGENT_LISTEN', value: `0.0.0.0:${inject.port}` },
    { name: 'ETCD_AGENT_DATA_DIR', value: dataDir },
    ...(initialCluster === undefined ? [] : [{ name: 'ETCD_AGENT_INITIAL_CLUSTER', value: initialCluster }]),
    ...(token === undefined ? [] : [{ name: 'ETCD_AGENT_INITIAL_CLUSTER_TOKEN', value: token }]),
    { name: 'ETCD_AGENT_PREPARE_FLAGS_FILE', value: FLAGS_FILE },
    { name: 'ETCD_AGENT_START_NOTE_FILE', value: START_NOTE_FILE },
  ];
  const user = { runAsUser: inject.runAs.uid, runAsGroup: inject.runAs.gid };
  const init = doc.createNode({
    name: PREPARE_NAME,
    image: inject.image,
    command: ['/bin/sh', '-c', `cp /bin/busybox ${STATIC_SHELL} && exec etcd-lifecycle-agent prepare`],
    env,
    // The sidecar's mounts too: its env names the token file, which prepare's configuration must read.
    volumeMounts: [
      ...dataMounts.map((m) => m.toJSON() as object),
      ...inject.agentMounts,
      { name: START_VOLUME, mountPath: START_MOUNT_PATH },
    ],
    resources: inject.resources,
    // As etcd's user and group, whose files these are; no capabilities.
    securityContext: {
      runAsNonRoot: user.runAsUser !== 0,
      ...user,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  });
  init.commentBefore = ' added by etcd-lifecycle-agent kube-inject: decides how etcd starts (join, lost disk, bootstrap)';
  if (sidecar !== undefined) {
    const prepareEnv = env.filter((e) =>
      /^ETCD_AGENT_(DATA_DIR|INITIAL_CLUSTER|INITIAL_CLUSTER_TOKEN|PREPARE_FLAGS_FILE|START_NOTE_FILE)$/.test((e as { name: string }).name),
    );
    for (const e of prepareEnv) seqAt(sidecar, 'env').add(doc.createNode(e));
    const readOnlyData = dataMounts.map((d) => ({ ...(d.toJSON() as object), readOnly: true }));
    for (const m of [...readOnlyData, { name: START_VOLUME, mountPath: START_MOUNT_PATH }])
      seqAt(sidecar, 'volumeMounts').add(doc.createNode(m));
    const security = sidecar.get('securityContext');
    if (isMap(security)) {
      security.set('runAsNonRoot', user.runAsUser !== 0);
      security.set('runAsUser', user.runAsUser);
      security.set('runAsGroup', user.runAsGroup);
    }
  }
  seqAt(podSpec, 'initContainers').add(init);

  // The command is replaced in place (same key, same position); etcd's `args` stay as they were.
  const pair = etcd.items.find((p) => isScalar(p.key) && p.key.value === 'command');
  if (pair !== undefined) {
    const command = doc.createNode(etcdStartCommand(commandWords));
    // One line: the shell, the start program and etcd's binary.
    command.flow = true;
    pair.value = command;
    const note = ' etcd starts with the flags etcd-lifecycle-agent prepare decided (kube-inject)';
    if (isScalar(pair.key))
      pair.key.commentBefore =
        pair.key.commentBefore === undefined || pair.key.commentBefore === null ? note : `${pair.key.commentBefore}\n${note}`;
  }
  // Writable: the start script says what it does there, renames a one-shot flags file once used and
  // leaves its refusal there (START_NOTE_FILE); prepare installs the script itself there.
  const mount = doc.createNode({ name: START_VOLUME, mountPath: START_MOUNT_PATH });
  if (isSeq(etcd.get('volumeMounts'))) (etcd.get('volumeMounts') as YAMLSeq).add(mount);
  else etcd.set('volumeMounts', doc.createNode([mount]));

  seqAt(podSpec, 'volumes').add(doc.createNode({ name: START_VOLUME, emptyDir: {} }));
  return true;
}

/** `--flag=value` or `--flag value` (also `-flag`), the last one winning as in etcd. */
function flagValue(words: string[], flag: string): string | undefined {
  let value: string | undefined;
  words.forEach((w, i) => {
    const m = new RegExp(`^--?${flag}(?:=(.*))?$`).exec(w);
    if (m !== null) value = m[1] ?? words[i + 1];
  });
  return value;
}
