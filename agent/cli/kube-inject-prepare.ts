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
 * emptyDir as `sh`, and the etcd container runs
 * `sh -c '. etcd-flags.sh && exec <etcd> "$@"'`: the flags file appends
 * `--initial-cluster*` to etcd's own arguments (Go's flag package keeps the
 * last), so the manifest's arguments stay as they were.
 */
import { Document, isMap, isScalar, isSeq, YAMLMap, YAMLSeq } from 'yaml';
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

/**
 * The script etcd's command runs (POSIX sh: Debian's static busybox in a pod, any sh in the tests).
 * It runs etcd as its child with the flags prepare wrote (and, once, the one-shot flags of
 * `etcd-flags-once.sh`, renamed before etcd starts so they are used at most once), and restarts it
 * when the sidecar asks (prepare/etcd-control.ts): `etcd-restart` stops etcd and goes round again,
 * `etcd-hold` keeps it stopped, saying `held <nonce>` in `etcd-state`, until the sidecar has prepared
 * it again. SIGTERM and SIGINT are passed on to etcd, and the script exits with etcd's status; when
 * etcd exits unasked, so does the script, and the kubelet restarts the container as it always did.
 */
export function etcdStartScript(flagsFile: string, binary: string): string {
  const dir = flagsFile.replace(/\/[^/]*$/, '') || '/';
  const f = (name: string): string => `${dir}/${name}`;
  return [
    `pid= stop=; trap 'stop=1; [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null' TERM INT`,
    'while :; do',
    `  rm -f ${f('etcd-restart')}`,
    `  if [ -e ${f('etcd-hold')} ]; then read -r n < ${f('etcd-hold')}; echo "held $n" > ${f('etcd-state')}; [ -n "$stop" ] && exit 0; sleep 1; continue; fi`,
    '  [ -n "$stop" ] && exit 0',
    `  ( . ${flagsFile} && if [ -e ${f('etcd-flags-once.sh')} ]; then . ${f('etcd-flags-once.sh')} && mv -f ${f('etcd-flags-once.sh')} ${f('etcd-flags-once.sh.used')}; fi && exec ${binary} "$@" ) &`,
    `  pid=$!; echo "running $pid" > ${f('etcd-state')}`,
    `  ( while [ ! -e ${f('etcd-restart')} ]; do sleep 1; done; kill -TERM "$pid" ) & w=$!`,
    '  wait "$pid"; rc=$?',
    '  if [ -n "$stop" ]; then wait "$pid"; r=$?; [ "$r" = 127 ] || rc=$r; kill "$w" 2>/dev/null; exit "$rc"; fi',
    '  kill "$w" 2>/dev/null; pid=',
    `  [ -e ${f('etcd-restart')} ] || [ -e ${f('etcd-hold')} ] || exit "$rc"`,
    'done',
  ].join('\n');
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
}

/**
 * Adds prepare to `podSpec` when `etcd` allows it (see the module comment); true when added. The
 * `sidecar` then gets what restarting and preparing etcd again takes (the recovery, a survivor's
 * rejoin): prepare's settings, etcd's data volume and the start directory, both writable, and etcd's
 * user, root as in etcd's image (the data directory is etcd's, mode 0700; moving it aside writes the
 * volume's root), still without any capability.
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
  ];
  const init = doc.createNode({
    name: PREPARE_NAME,
    image: inject.image,
    command: ['/bin/sh', '-c', `cp /bin/busybox ${STATIC_SHELL} && exec etcd-lifecycle-agent prepare`],
    env,
    // The sidecar's mounts too: its env names the token file, which prepare's configuration must read.
    volumeMounts: [...dataMounts.map((m) => m.toJSON() as object), ...inject.agentMounts, { name: START_VOLUME, mountPath: START_MOUNT_PATH }],
    resources: inject.resources,
    // Root, as etcd's own image runs, to move a stale data directory aside on etcd's volume; no capabilities.
    securityContext: {
      runAsUser: 0,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    },
  });
  init.commentBefore = ' added by etcd-lifecycle-agent kube-inject: decides how etcd starts (join, lost disk, bootstrap)';
  if (sidecar !== undefined) {
    const prepareEnv = env.filter((e) => /^ETCD_AGENT_(DATA_DIR|INITIAL_CLUSTER|INITIAL_CLUSTER_TOKEN|PREPARE_FLAGS_FILE)$/.test((e as { name: string }).name));
    for (const e of prepareEnv) seqAt(sidecar, 'env').add(doc.createNode(e));
    for (const m of [...dataMounts.map((d) => d.toJSON() as object), { name: START_VOLUME, mountPath: START_MOUNT_PATH }]) seqAt(sidecar, 'volumeMounts').add(doc.createNode(m));
    const security = sidecar.get('securityContext');
    if (isMap(security)) {
      security.set('runAsNonRoot', false);
      security.set('runAsUser', 0);
    }
  }
  seqAt(podSpec, 'initContainers').add(init);

  // The command is replaced in place (same key, same position); etcd's `args` stay as they were.
  const pair = etcd.items.find((p) => isScalar(p.key) && p.key.value === 'command');
  if (pair !== undefined) {
    pair.value = doc.createNode([STATIC_SHELL, '-c', etcdStartScript(FLAGS_FILE, commandWords[0]), ...commandWords]);
    const note = ' etcd starts with the flags etcd-lifecycle-agent prepare decided (kube-inject)';
    if (isScalar(pair.key)) pair.key.commentBefore = pair.key.commentBefore === undefined || pair.key.commentBefore === null ? note : `${pair.key.commentBefore}\n${note}`;
  }
  // Writable: the start script says what it does there and renames a one-shot flags file once used.
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
