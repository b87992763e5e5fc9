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
 * emptyDir as `sh`, and the etcd container runs the start script below with it:
 * the flags prepare wrote are appended to etcd's own arguments (Go's flag package
 * keeps the last), so the manifest's arguments stay as they were. The script first
 * checks etcd's version against the versions the data directory records, which the
 * flags file carries (prepare/version-gate.ts); a refusal is also written to
 * START_NOTE_FILE, in the same emptyDir, so the sidecar's health names it.
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
/** Where the etcd command leaves the line with which it refused to start etcd (beside the flags file); the sidecar reads it. */
export const START_NOTE_FILE = `${START_MOUNT_PATH}/etcd-start-note`;
/** The start script's pause between looks while etcd is held: a hold lifted, or a move-aside asked for, is acted on within it. */
const HOLD_POLL_SECONDS = 0.2;
/** The restart watcher's pause between looks: a restart asked for, or etcd's exit, is seen within it. */
const RESTART_WATCH_SECONDS = 1;

/**
 * The script etcd's command runs (POSIX sh: Debian's static busybox in a pod, copied from the agent's
 * image, which needs no PATH and no other file of the etcd image). It runs etcd as its child with
 * the flags prepare wrote, and restarts it when the sidecar asks (prepare/etcd-control.ts):
 * - `etcd-restart` stops etcd (SIGTERM) and goes round again; `etcd-hold` keeps it stopped, saying
 *   `held <nonce>` in `etcd-state`, until the sidecar has prepared it again;
 * - `etcd-flags-once.sh`: flags for the next start only, renamed to `….used` before etcd starts, so
 *   they are used at most once whatever crashes (`etcd-state` then says `running <pid> once`);
 * - `etcd-move-aside`, only while held: renames the data directory to the sibling the file names,
 *   which must be `<data dir>.removed-<stamp>` (etcd's own container, as etcd's user, makes every
 *   change to etcd's data; the sidecar mounts it read-only).
 *
 * - the version gate (the `#etcd-version-*` lines prepare/version-gate.ts `gateLines` writes into the
 *   flags file): before etcd starts, `"$0" --version` (etcd's binary) is compared with the gate's
 *   ranks; a version outside them is refused with the gate's line on stderr, in `etcd-start-note`
 *   and in the termination log, and exit 1, as etcd itself would fail (a start that passes empties
 *   the note);
 *
 * The flags files are read as data, never run: each line is `set -- "$@" '<flag>'` (so an older etcd
 * command that sources the file reads it the same), and only `--initial-cluster=`,
 * `--initial-cluster-state=new|existing`, `--initial-cluster-token=` and, in the one-shot file,
 * `--force-new-cluster` are taken; any other line stops the start (exit 2). Whoever can write the
 * start directory can therefore choose among these flags, but cannot run anything in etcd's container.
 *
 * `etcd-state` is written to `etcd-state.new` and renamed into place, so the sidecar reads one whole line.
 *
 * SIGTERM and SIGINT are passed on to etcd, and the script exits with etcd's status; when etcd exits
 * unasked, so does the script, and the kubelet restarts the container as it always did. The watcher
 * of `etcd-restart` ends by itself within a second of etcd's exit: a shell may lose the SIGTERM sent
 * to a subshell it has just forked (dash's inherited trap, before the subshell resets it), and a
 * watcher left looping would hold the script's output open, and with it whoever reads that output.
 */
export function etcdStartScript(flagsFile: string, binary: string, dataDir: string): string {
  const dir = flagsFile.replace(/\/[^/]*$/, '') || '/';
  const f = (name: string): string => shellWord(`${dir}/${name}`);
  const flags = shellWord(flagsFile);
  const data = shellWord(dataDir.replace(/\/+$/, ''));
  const once = f('etcd-flags-once.sh');
  const used = f('etcd-flags-once.sh.used');
  const note = f('etcd-start-note');
  // Written whole, then renamed into place: a reader never sees it half written (or empty).
  const state = f('etcd-state');
  const stateNew = f('etcd-state.new');
  return [
    `pid= stop=; trap 'stop=1; [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null' TERM INT`,
    'while :; do',
    `  rm -f ${f('etcd-restart')}`,
    `  if [ -e ${f('etcd-hold')} ]; then`,
    `    read -r n < ${f('etcd-hold')}`,
    `    if [ -e ${f('etcd-move-aside')} ]; then read -r t < ${f('etcd-move-aside')}`,
    `      case "$t" in ${data}.removed-*/*) ;; ${data}.removed-*) [ -e "$t" ] || mv ${data} "$t";; esac; rm -f ${f('etcd-move-aside')}; fi`,
    `    echo "held $n" > ${stateNew}; mv -f ${stateNew} ${state}; [ -n "$stop" ] && exit 0; sleep ${HOLD_POLL_SECONDS}; continue`,
    '  fi',
    '  [ -n "$stop" ] && exit 0',
    `  o=; [ -e ${once} ] && mv -f ${once} ${used} && o=${used}`,
    `  ( g= a= b=; for f in ${flags} $o; do while IFS= read -r l || [ -n "$l" ]; do`,
    `      case "$f:$l" in ${flags}:'#etcd-version-gate '*) g=\${l#* };; ${flags}:'#etcd-version-too-old '*) a=\${l#* };; ${flags}:'#etcd-version-too-new '*) b=\${l#* };; esac`,
    `      case "$l" in ''|'#'*) continue;; esac; v=\${l#"set -- \\"\\$@\\" '"}; v=\${v%"'"}`,
    `      case "$f:$v" in *\\'*) ;; *:--initial-cluster=*|*:--initial-cluster-token=*|*:--initial-cluster-state=new|*:--initial-cluster-state=existing|${used}:--force-new-cluster)`,
    `        [ "$l" = "set -- \\"\\$@\\" '$v'" ] && { set -- "$@" "$v"; continue; };; esac`,
    `      echo "etcd start script: refused line of $f: $l" >&2; exit 2`,
    `    done < "$f"; done; case "$g" in *[!0-9' ']*|'') g=;; esac; r=`,
    `    if [ -n "$g" ]; then v=$("$0" --version 2>/dev/null); v=\${v#*etcd Version: }; v=\${v%%[!0-9.]*}; m=\${v#*.}`,
    `      case "\${v%%.*}.\${m%%.*}" in [0-9]*.[0-9]*) k=$(( \${v%%.*} * 10000 + \${m%%.*} ))`,
    `        [ "$k" -lt "\${g% *}" ] && r=$a; [ "$k" -gt "\${g#* }" ] && r=$b;; esac; fi`,
    `    if [ -n "$r" ]; then r=\${r%%\\{version\\}*}$v\${r#*\\{version\\}}; printf 'etcd-lifecycle-agent: %s\\n' "$r" >&2`,
    `      { printf '%s\\n' "$r" > ${note}; } 2>/dev/null; [ -w /dev/termination-log ] && { printf '%s\\n' "$r" > /dev/termination-log; } 2>/dev/null; exit 1; fi`,
    `    { : > ${note}; } 2>/dev/null; exec ${binary} "$@" ) &`,
    `  pid=$!; echo "running $pid\${o:+ once}" > ${stateNew}; mv -f ${stateNew} ${state}`,
    `  ( while [ ! -e ${f('etcd-restart')} ] && kill -0 "$pid" 2>/dev/null; do sleep ${RESTART_WATCH_SECONDS}; done; [ -e ${f('etcd-restart')} ] && kill -TERM "$pid" ) & w=$!`,
    '  wait "$pid"; rc=$?',
    '  if [ -n "$stop" ]; then wait "$pid"; r=$?; [ "$r" = 127 ] || rc=$r; kill "$w" 2>/dev/null; exit "$rc"; fi',
    '  kill "$w" 2>/dev/null; pid=',
    `  [ -e ${f('etcd-restart')} ] || [ -e ${f('etcd-hold')} ] || exit "$rc"`,
    'done',
  ].join('\n');
}

/** `s` as one shell word: bare when it is only safe characters (the usual paths), else single-quoted. */
function shellWord(s: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
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
 * rejoin): prepare's settings, the start directory (writable: the hold, restart and one-shot files)
 * and etcd's data volume read-only, to read the write-ahead log of a stopped member (every change to
 * the data is made by etcd's own start script). It runs as etcd's user, which the init container
 * does too: etcd's files are that user's, mode 0700 and 0600, so no other user and no group can read
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
  const user = etcdUser(podSpec, etcd);
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
    // As etcd's user (root in etcd's own images), whose files these are; no capabilities.
    securityContext: {
      ...user,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
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
      if (user.runAsGroup !== undefined) security.set('runAsGroup', user.runAsGroup);
    }
  }
  seqAt(podSpec, 'initContainers').add(init);

  // The command is replaced in place (same key, same position); etcd's `args` stay as they were.
  const pair = etcd.items.find((p) => isScalar(p.key) && p.key.value === 'command');
  if (pair !== undefined) {
    pair.value = doc.createNode([STATIC_SHELL, '-c', etcdStartScript(FLAGS_FILE, commandWords[0], dataDir), ...commandWords]);
    const note = ' etcd starts with the flags etcd-lifecycle-agent prepare decided (kube-inject)';
    if (isScalar(pair.key))
      pair.key.commentBefore =
        pair.key.commentBefore === undefined || pair.key.commentBefore === null ? note : `${pair.key.commentBefore}\n${note}`;
  }
  // Writable: the start script says what it does there, renames a one-shot flags file once used and
  // leaves its refusal there (START_NOTE_FILE).
  const mount = doc.createNode({ name: START_VOLUME, mountPath: START_MOUNT_PATH });
  if (isSeq(etcd.get('volumeMounts'))) (etcd.get('volumeMounts') as YAMLSeq).add(mount);
  else etcd.set('volumeMounts', doc.createNode([mount]));

  seqAt(podSpec, 'volumes').add(doc.createNode({ name: START_VOLUME, emptyDir: {} }));
  return true;
}

/**
 * The user etcd runs as: its container's `runAsUser` (and `runAsGroup`), else the pod's, else root,
 * as etcd's own images run (kube-inject cannot read an image's USER; an image that runs etcd as
 * another user needs `runAsUser` in the manifest).
 */
function etcdUser(podSpec: YAMLMap, etcd: YAMLMap): { runAsUser: number; runAsGroup?: number } {
  const of = (key: string): number | undefined => {
    for (const owner of [etcd, podSpec]) {
      const security = owner.get('securityContext');
      const value = isMap(security) ? security.get(key) : undefined;
      if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
    }
    return undefined;
  };
  const group = of('runAsGroup');
  return { runAsUser: of('runAsUser') ?? 0, ...(group === undefined ? {} : { runAsGroup: group }) };
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
