/**
 * The etcd container's start program: a POSIX sh script that prepare (the init container) installs
 * as `etcd-start` beside the flags file, in the emptyDir the etcd container mounts, and that the
 * etcd container's command runs with the static shell copied there too:
 *
 *   command: [/var/run/etcd-lifecycle-agent/sh, /var/run/etcd-lifecycle-agent/etcd-start, /usr/local/bin/etcd]
 *
 * etcd's binary is the script's first argument and etcd's own arguments follow, so the manifest's
 * `args` stay as they were. The script is rendered from the flags file's path and the data directory
 * each time prepare runs, so a new agent image brings a new script with the next pod start, and a
 * manifest never carries a copy of it.
 *
 * The official etcd images from 3.5.7 on have no shell: the agent's image carries Debian's static
 * busybox, which the init container copies beside the flags file as `sh`. The script needs no PATH
 * and no other file of the etcd image.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The file name of the start program, beside the flags file. */
export const START_SCRIPT_NAME = 'etcd-start';
/** The start script's pause between looks while etcd is held: a hold lifted, or a move-aside asked for, is acted on within it. */
const HOLD_POLL_SECONDS = 0.2;
/** The restart watcher's pause between looks: a restart asked for, or etcd's exit, is seen within it. */
const RESTART_WATCH_SECONDS = 1;

/** Where prepare installs the start program for the flags file `flagsFile`: beside it. */
export function startScriptPath(flagsFile: string): string {
  return path.join(path.dirname(flagsFile), START_SCRIPT_NAME);
}

/**
 * The start script (POSIX sh). Its first argument is etcd's binary; it runs etcd as its child with
 * the remaining arguments and then the flags prepare wrote, and restarts it when the sidecar asks
 * (prepare/etcd-control.ts):
 * - `etcd-restart` stops etcd (SIGTERM) and goes round again; `etcd-hold` keeps it stopped, saying
 *   `held <nonce>` in `etcd-state`, until the sidecar has prepared it again;
 * - `etcd-flags-once.sh`: flags for the next start only, renamed to `….used` before etcd starts, so
 *   they are used at most once whatever crashes (`etcd-state` then says `running <pid> once`);
 * - `etcd-move-aside`, only while held: renames the data directory to the sibling the file names,
 *   which must be `<data dir>.removed-<stamp>` (etcd's own container, as etcd's user, makes every
 *   change to etcd's data; the sidecar mounts it read-only).
 *
 * - the version gate (the `#etcd-version-*` lines prepare/version-gate.ts `gateLines` writes into the
 *   flags file): before etcd starts, `<binary> --version` is compared with the gate's ranks; a version
 *   outside them is refused with the gate's line on stderr, in `etcd-start-note` and in the
 *   termination log, and exit 1, as etcd itself would fail (a start that passes empties the note);
 *
 * The flags files are read as data, never run: each line is `set -- "$@" '<flag>'` (so an older etcd
 * command that sources the file reads it the same), and only `--initial-cluster=`,
 * `--initial-cluster-state=new|existing`, `--initial-cluster-token=` and, in the one-shot file,
 * `--force-new-cluster` are taken; any other line stops the start (exit 2).
 *
 * `etcd-state` is written to `etcd-state.new` and renamed into place, so the sidecar reads one whole line.
 *
 * SIGTERM and SIGINT are passed on to etcd (as SIGTERM). A stop that was asked for exits 0 when etcd
 * stops as asked (status 0, or 143: etcd re-raises SIGTERM once it has shut down), so a rollout or a
 * deleted pod does not look like a crash; any other status of etcd is the script's, on a stop too.
 * When etcd exits unasked, so does the script, with etcd's status, and the kubelet restarts the
 * container as it always did. The watcher of `etcd-restart` ends by itself within a second of etcd's
 * exit: a shell may lose the SIGTERM sent to a subshell it has just forked (dash's inherited trap,
 * before the subshell resets it), and a watcher left looping would hold the script's output open,
 * and with it whoever reads that output.
 */
export function etcdStartScript(flagsFile: string, dataDir: string): string {
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
    '# etcd-lifecycle-agent: the etcd container starts etcd through this script, installed by prepare.',
    '# Usage: sh etcd-start ETCD_BINARY [ETCD_ARGUMENT...]',
    `[ "$#" -gt 0 ] || { echo "etcd start script: the first argument must be etcd's binary" >&2; exit 2; }`,
    'etcd=$1; shift',
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
    `    if [ -n "$g" ]; then v=$("$etcd" --version 2>/dev/null); v=\${v#*etcd Version: }; v=\${v%%[!0-9.]*}; m=\${v#*.}`,
    `      case "\${v%%.*}.\${m%%.*}" in [0-9]*.[0-9]*) k=$(( \${v%%.*} * 10000 + \${m%%.*} ))`,
    `        [ "$k" -lt "\${g% *}" ] && r=$a; [ "$k" -gt "\${g#* }" ] && r=$b;; esac; fi`,
    `    if [ -n "$r" ]; then r=\${r%%\\{version\\}*}$v\${r#*\\{version\\}}; printf 'etcd-lifecycle-agent: %s\\n' "$r" >&2`,
    `      { printf '%s\\n' "$r" > ${note}; } 2>/dev/null; [ -w /dev/termination-log ] && { printf '%s\\n' "$r" > /dev/termination-log; } 2>/dev/null; exit 1; fi`,
    `    { : > ${note}; } 2>/dev/null; exec "$etcd" "$@" ) &`,
    `  pid=$!; echo "running $pid\${o:+ once}" > ${stateNew}; mv -f ${stateNew} ${state}`,
    `  ( while [ ! -e ${f('etcd-restart')} ] && kill -0 "$pid" 2>/dev/null; do sleep ${RESTART_WATCH_SECONDS}; done; [ -e ${f('etcd-restart')} ] && kill -TERM "$pid" ) & w=$!`,
    '  wait "$pid"; rc=$?',
    // A trapped signal ends the first wait early (status > 128); the second wait gets etcd's own
    // status, or 127 when the first already had it.
    '  if [ -n "$stop" ]; then wait "$pid"; r=$?; [ "$r" = 127 ] || rc=$r; kill "$w" 2>/dev/null; case "$rc" in 0|143) rc=0;; esac; exit "$rc"; fi',
    '  kill "$w" 2>/dev/null; pid=',
    `  [ -e ${f('etcd-restart')} ] || [ -e ${f('etcd-hold')} ] || exit "$rc"`,
    'done',
    '',
  ].join('\n');
}

/**
 * Writes the start script for `flagsFile` and `dataDir` beside the flags file, mode 0755, atomically
 * (a temporary file renamed into place: a container starting meanwhile runs the old script or the
 * new one, never half of one). Answers its path.
 */
export function installStartScript(flagsFile: string, dataDir: string): string {
  const file = startScriptPath(flagsFile);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = fs.openSync(tmp, 'w', 0o755);
  try {
    fs.writeSync(fd, etcdStartScript(flagsFile, dataDir));
    // The mode asked of open is cut by the umask.
    fs.fchmodSync(fd, 0o755);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  return file;
}

/** `s` as one shell word: bare when it is only safe characters (the usual paths), else single-quoted. */
function shellWord(s: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
