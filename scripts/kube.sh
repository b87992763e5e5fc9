#!/usr/bin/env bash
# A one-node Kubernetes on this machine, for the tests that run the kit on a real kubelet and for a
# person trying the kit by hand. Run as root:
#   bash scripts/kube.sh up [ARCHIVE...]   start it, import the image archives (also KUBE_IMAGES),
#                                          make the PVs, wait until it is usable, print how to use it
#   eval "$(bash scripts/kube.sh env)"     set KUBECONFIG (and kubectl's cache) in this shell
#   bash scripts/kube.sh kubeconfig        print the kubeconfig's path (for a test)
#   bash scripts/kube.sh status            say what runs; exit 0 only when it is up and usable
#   bash scripts/kube.sh import ARCHIVE... import more OCI or docker image archives into it
#   bash scripts/kube.sh pvs [COUNT]       make Released PVs Available again (their directory
#                                          emptied), then add PVs until COUNT are Available
#   bash scripts/kube.sh kubeblocks        run KubeBlocks' controller on it (below); again: nothing
#   bash scripts/kube.sh down              stop it and remove everything it made
#
# What `up` starts. Every daemon runs in a network namespace of its own, etcd-lifecycle-agent-kube,
# and nothing listens outside it:
#   the node      198.18.0.2/24 on a veth pair whose other end, elakube0, is 198.18.0.1 in the root
#                 namespace, with a route there to 198.19.0.0/16 (pods and Services) through the node;
#                 so kubectl, curl and a test reach the API server, pods and ClusterIPs from the root
#                 namespace, and no traffic leaves 198.18.0.0/15
#   etcd          for the API server only, on 127.0.0.1:12379 in the node's namespace (the kit's own
#                 etcd ports stay free for hostNetwork pods); `bash scripts/etcd.sh 3.6`, or
#                 KUBE_ETCD_VERSION
#   kube-apiserver https://198.18.0.2:6443, client certificates, AlwaysAllow authorization, PodSecurity
#                 admission (a namespace labelled pod-security.kubernetes.io/enforce: restricted is
#                 enforced), Services in 198.19.128.0/20 (`kubernetes` is 198.19.128.1)
#   kube-controller-manager, kube-scheduler, kubelet (node kube-node), kube-proxy (iptables mode)
#                 Kubernetes' own binaries from `bash scripts/kube-build.sh`
#   containerd    Debian's, with runc and the CNI bridge plugin: pods in 198.19.0.0/24 on bridge cni0;
#                 no registry can be reached, so its sandbox image registry.k8s.io/pause:3.10 is
#                 imported from `bash scripts/image.sh pause`, and every other image a pod runs must
#                 be among the archives given (a short name such as etcd-lifecycle-agent:0.1.0 is
#                 also tagged as the docker.io/library/ name kubelet asks for)
#   CoreDNS       a process on 198.18.0.2:53 serving cluster.local (kubelet's clusterDNS), from
#                 `bash scripts/coredns.sh`
#   storage       a default StorageClass (KUBE_STORAGE_CLASS, default local) of static `local` PVs,
#                 KUBE_PVS of them (default 6: a StatefulSet of 5 and a spare for a lost disk) of
#                 KUBE_PV_SIZE (default 10Gi, nominal), each a directory under KUBE_DIR/pv. kubelet
#                 applies fsGroup to local volumes, as it does not to hostPath ones. Reclaim policy
#                 Retain: a deleted claim leaves its PV Released until `pvs` empties it
# Everything it writes is under KUBE_DIR (default /tmp/etcd-lifecycle-agent-kube): certificates,
# kubeconfig, configs, etcd's and containerd's data, kubelet's root, the PVs, and logs/<daemon>.log.
# Its cgroups (every daemon's, and kubelet's pods' through cgroupRoot) are under
# /etcd-lifecycle-agent-kube in each cgroup hierarchy. kubelet sets vm.overcommit_memory,
# kernel.panic and kernel.panic_on_oops as it wants them; `up` records their values first and
# `down` puts them back.
#
# `up` on a cluster that is already up and usable imports the archives given, adds PVs up to
# KUBE_PVS and says it reused it; it refuses one that is up but not usable now; one left by a crash,
# a killed `up` or a dead daemon is removed first, saying so.
# `up` waits for the node to be Ready, CoreDNS to answer for kubernetes.default, and the default
# ServiceAccount; a failing `up` prints the end of the logs of what failed and then removes everything
# it made (exit 1). The addresses and names are fixed, so one cluster runs on a machine at a time.
#
# `down` kills every process it started and everything they started (the daemons, containerd's
# shims, every container), unmounts everything under KUBE_DIR, deletes the network namespace (with
# its veths, bridge and kube-proxy's iptables rules: no rule is ever added in the root namespace),
# removes its cgroups and what kubelet, containerd and CNI keep outside KUBE_DIR whatever they are
# told (links in /var/log/containers, CNI's cache in /var/lib/cni, the device-plugin socket in
# /var/lib/kubelet, the shims' sockets in /run/containerd; each folder removed when `up` made it),
# puts the kernel settings back, and deletes KUBE_DIR (KUBE_KEEP_LOGS=1 keeps KUBE_DIR/logs); only the
# empty lock file KUBE_DIR.lock stays. It is safe to run twice and after a crashed `up`, and checks
# that nothing is left (exit 1 naming what is, KUBE_DIR kept).
#
# By hand, with the project's images (building the Kubernetes binaries, CoreDNS and the images
# first where they are missing):
#   bash scripts/kube.sh up $(bash scripts/image.sh) && eval "$(bash scripts/kube.sh env)"
#   kubectl create namespace kit && kubectl apply -n kit -f deploy/statefulset-with-agent.yaml
#   bash scripts/kube.sh down
# A test: `bash scripts/kube.sh up ARCHIVE...` in its global setup, then KUBECONFIG from
# `bash scripts/kube.sh kubeconfig`, and `bash scripts/kube.sh down` in its teardown. Images are
# never pulled: imagePullPolicy IfNotPresent (the default for a tag other than latest) or Never.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${KUBE_DIR:-/tmp/etcd-lifecycle-agent-kube}"
netns=etcd-lifecycle-agent-kube
cgname=etcd-lifecycle-agent-kube
host_veth=elakube0
host_ip=198.18.0.1
node_ip=198.18.0.2
node=kube-node
pod_cidr=198.19.0.0/24
pod_gateway=198.19.0.1
service_cidr=198.19.128.0/20
kubernetes_ip=198.19.128.1
routed=198.19.0.0/16
apiserver="https://$node_ip:6443"
etcd_port=12379
pause_image=registry.k8s.io/pause:3.10
cni_network=etcd-lifecycle-agent-kube
storage_class="${KUBE_STORAGE_CLASS:-local}"
pv_count="${KUBE_PVS:-6}"
pv_size="${KUBE_PV_SIZE:-10Gi}"
etcd_version="${KUBE_ETCD_VERSION:-3.6}"
kubectl_bin="${KUBECTL:-kubectl}"
lock="${dir%/}.lock"
# The kernel settings kubelet changes on start (its setupKernelTunables), restored by `down`.
tunables=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes)
daemons=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy coredns)

say() { echo "kube.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

need_root() {
  [ "$(id -u)" -eq 0 ] || die "$1 needs root (network namespaces, mounts, cgroups)"
}

# The cgroup hierarchies mounted under /sys/fs/cgroup (v1 controllers, named ones, cgroup2).
hierarchies() {
  # The filesystem type is the field after the "-" that ends a mountinfo line's optional fields.
  awk '{ for (i = 7; i < NF; i++) if ($i == "-") break; t = $(i + 1) }
    (t == "cgroup" || t == "cgroup2") && $5 ~ /^\/sys\/fs\/cgroup(\/|$)/ { print $5 }' /proc/self/mountinfo
}

kc() { "$kubectl_bin" --kubeconfig "$dir/kubeconfig" --cache-dir "$dir/kubectl-cache" "$@"; }
ctr_() { ctr --address "$dir/containerd/containerd.sock" -n k8s.io "$@"; }
in_node() { nsenter --net="/run/netns/$netns" -- "$@"; }

# ---------------------------------------------------------------- down

# Every process to end: those in its cgroups, in the node's network namespace, or in a pid file.
our_pids() {
  local h ns_inode
  for h in $(hierarchies); do
    [ -d "$h/$cgname" ] && find "$h/$cgname" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  if [ -e "/run/netns/$netns" ]; then
    ns_inode="$(stat -L -c %i "/run/netns/$netns" 2>/dev/null || true)"
    # One ls for every process: a stat each is seconds on a busy machine.
    # shellcheck disable=SC2012
    [ -n "$ns_inode" ] && ls -l /proc/[0-9]*/ns/net 2>/dev/null |
      awk -v t="net:[$ns_inode]" '$NF == t { split($(NF - 2), p, "/"); print p[3] }'
  fi
  pid_files
  true
}

# The pids in KUBE_DIR/run that are still this cluster's daemons (a pid file outlives a crash, and
# its pid may have been given to another process since).
pid_files() {
  local f pid
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] || continue
    read -r pid <"$f" || continue
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -F "$dir/" && echo "$pid"
  done
  true
}

# alive PID...: the ones still alive; a zombie has ended, and waits only for its parent to reap it.
alive() {
  local pid stat
  for pid in "$@"; do
    [ "$pid" != "$$" ] || continue
    read -r stat 2>/dev/null <"/proc/$pid/stat" || continue
    stat="${stat##*) }"
    [ "${stat%% *}" != Z ] && echo "$pid"
  done
  true
}

alive_pids() {
  # shellcheck disable=SC2046
  alive $(our_pids | sort -un)
}

kill_everything() {
  local freezer=/sys/fs/cgroup/freezer/$cgname pids end
  # kubelet first, so that it restarts nothing while the rest goes.
  running kubelet && kill -9 "$(cat "$dir/run/kubelet.pid")" 2>/dev/null
  # Frozen, nothing forks while it is killed; SIGKILL lands when thawed.
  [ -d "$freezer" ] && echo FROZEN >"$freezer/freezer.state" 2>/dev/null
  end=$((SECONDS + 30))
  while :; do
    pids="$(alive_pids)"
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null
    [ -d "$freezer" ] && echo THAWED >"$freezer/freezer.state" 2>/dev/null
    if [ "$SECONDS" -ge "$end" ]; then
      say "still alive after SIGKILL: $(tr '\n' ' ' <<<"$pids")"
      return 1
    fi
    sleep 0.2
  done
  [ -d "$freezer" ] && echo THAWED >"$freezer/freezer.state" 2>/dev/null
  true
}

# Mount points under KUBE_DIR, deepest first (mountinfo escapes a space as \040).
our_mounts() {
  awk -v d="$dir/" 'BEGIN { n = 0 } { p = $5; gsub(/\\040/, " ", p); if (index(p, d) == 1) m[n++] = p }
    END { for (i = n - 1; i >= 0; i--) print m[i] }' /proc/self/mountinfo
}

unmount_everything() {
  local m tries=0
  while [ -n "$(our_mounts)" ]; do
    while IFS= read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done < <(our_mounts)
    tries=$((tries + 1))
    if [ "$tries" -ge 5 ]; then
      say "still mounted: $(our_mounts | tr '\n' ' ')"
      return 1
    fi
  done
}

remove_network() {
  local end
  if [ -e "/run/netns/$netns" ]; then
    ip netns delete "$netns" 2>/dev/null || true
  fi
  # The veth pair goes with the namespace, a moment after its last user.
  end=$((SECONDS + 10))
  while ip link show "$host_veth" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$end" ]; then
      ip link delete "$host_veth" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
}

remove_cgroups() {
  local h end=$((SECONDS + 10)) left
  while :; do
    left=""
    for h in $(hierarchies); do
      [ -d "$h/$cgname" ] || continue
      find "$h/$cgname" -depth -type d -exec rmdir {} \; 2>/dev/null
      [ -d "$h/$cgname" ] && left+=" $h/$cgname"
    done
    [ -z "$left" ] && return 0
    if [ "$SECONDS" -ge "$end" ]; then
      say "cgroups not removed:$left"
      return 1
    fi
    sleep 0.2
  done
}

# Files kubelet, CNI and kubectl keep outside KUBE_DIR: links in /var/log/containers, CNI's result
# cache (one file per sandbox and network: the bridge's and containerd's loopback), discovery.
remove_outside_files() {
  local f id
  if [ -d /var/log/containers ]; then
    for f in /var/log/containers/*; do
      [ -L "$f" ] && case "$(readlink "$f")" in "$dir"/*) rm -f "$f" ;; esac
    done
    [ -f "$dir/made-var-log-containers" ] && rmdir /var/log/containers 2>/dev/null
  fi
  if [ -d /var/lib/cni/results ]; then
    rm -f /var/lib/cni/results/"$cni_network"-* 2>/dev/null
    for f in "$dir"/containerd/{root,state}/io.containerd.grpc.v1.cri/sandboxes/*; do
      id="${f##*/}"
      [ -n "$id" ] && [ "$id" != "*" ] && rm -f "/var/lib/cni/results/cni-loopback-$id-lo"
    done
  fi
  [ -f "$dir/made-var-lib-cni" ] && rm -rf /var/lib/cni
  # kubelet's device-plugin socket is always /var/lib/kubelet/device-plugins/kubelet.sock.
  [ -f "$dir/made-var-lib-kubelet" ] && rm -rf /var/lib/kubelet
  rm -rf "${HOME:-/root}/.kube/cache/discovery/${node_ip}_6443"
  # containerd's shims keep their sockets in /run/containerd/s whatever its state directory is.
  if [ -f "$dir/made-run-containerd" ] && [ -z "$(alive $(pgrep -x containerd))" ]; then
    rm -rf /run/containerd
  fi
  true
}

restore_tunables() {
  local t v
  [ -f "$dir/tunables" ] || return 0
  while read -r t v; do
    [ -n "$t" ] && [ "$(cat "/proc/sys/$t")" != "$v" ] && echo "$v" >"/proc/sys/$t" 2>/dev/null
  done <"$dir/tunables"
  true
}

# What is left of a cluster: prints one line per kind of leftover; nothing when none.
leftovers() {
  local h pids m
  pids="$(alive_pids)"
  [ -n "$pids" ] && echo "processes: $(tr '\n' ' ' <<<"$pids")"
  m="$(our_mounts | tr '\n' ' ')"
  [ -n "$m" ] && echo "mounts: $m"
  [ -e "/run/netns/$netns" ] && echo "network namespace: $netns"
  ip link show "$host_veth" >/dev/null 2>&1 && echo "interface: $host_veth"
  for h in $(hierarchies); do
    [ -d "$h/$cgname" ] && echo "cgroup: $h/$cgname"
  done
  for m in run-containerd var-lib-kubelet var-lib-cni; do
    [ -e "$dir/made-$m" ] && [ -d "/${m//-//}" ] && echo "directory: /${m//-//}"
  done
  m="$(find /var/log/containers -maxdepth 1 -lname "$dir/*" 2>/dev/null | head -n 3 | tr '\n' ' ')"
  [ -n "$m" ] && echo "links: $m"
  m="$(find /var/lib/cni/results -maxdepth 1 -name "$cni_network-*" 2>/dev/null | head -n 3 | tr '\n' ' ')"
  [ -n "$m" ] && echo "CNI cache: $m"
  true
}

teardown() {
  set +e
  local left m
  rm -f "$dir/up"
  kill_everything
  unmount_everything
  remove_network
  remove_cgroups
  remove_outside_files
  restore_tunables
  left="$(leftovers)"
  if [ -n "$left" ]; then
    say "down left these behind (KUBE_DIR $dir is kept):"
    while IFS= read -r m; do say "  $m"; done <<<"$left"
    set -e
    return 1
  fi
  if [ -d "$dir" ]; then
    # Never a folder this script did not make, whatever KUBE_DIR says.
    if [ ! -f "$dir/.kube-sh" ] && [ -n "$(ls -A "$dir")" ]; then
      say "$dir was not made by kube.sh (no .kube-sh in it): not deleted"
      set -e
      return 1
    fi
    if [ "${KUBE_KEEP_LOGS:-}" = 1 ] && [ -d "$dir/logs" ]; then
      find "$dir" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf --one-file-system {} +
    else
      rm -rf --one-file-system "$dir"
    fi
  fi
  set -e
}

# ---------------------------------------------------------------- up

ensure_packages() {
  local missing=() cmd
  for cmd in containerd:containerd runc:runc ctr:containerd iptables:iptables conntrack:conntrack \
    socat:socat nsenter:util-linux openssl:openssl curl:curl busybox:busybox-static; do
    command -v "${cmd%%:*}" >/dev/null 2>&1 || missing+=("${cmd#*:}")
  done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] ||
    missing+=(containernetworking-plugins)
  [ ${#missing[@]} -eq 0 ] && return 0
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  say "installing from Debian: ${missing[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  # Debian's containerd package may start its own daemon where an init system runs; this one never
  # uses /run/containerd/containerd.sock.
}

make_pki() {
  local p="$dir/pki"
  mkdir -p "$p"
  (
    umask 077
    cd "$p"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -keyout ca.key -out ca.crt -subj "/CN=etcd-lifecycle-agent-kube-ca" 2>/dev/null
    cert() { # NAME SUBJECT [SAN]
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      if [ -n "${3:-}" ]; then
        printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" >"$1.ext"
      else
        printf 'extendedKeyUsage=clientAuth\n' >"$1.ext"
      fi
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    cert apiserver "/CN=kube-apiserver" "IP:$node_ip,IP:$kubernetes_ip,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    cert admin "/O=system:masters/CN=kubernetes-admin"
    cert kubelet "/O=system:nodes/CN=system:node:$node"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

# kubeconfig FILE CERT: a kubeconfig for the API server with the client certificate CERT.
kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: etcd-lifecycle-agent-kube
  cluster:
    server: $apiserver
    certificate-authority-data: $(base64 -w0 "$dir/pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$dir/pki/$2.crt")
    client-key-data: $(base64 -w0 "$dir/pki/$2.key")
contexts:
- name: etcd-lifecycle-agent-kube
  context:
    cluster: etcd-lifecycle-agent-kube
    user: $2
current-context: etcd-lifecycle-agent-kube
EOF
  chmod 600 "$1"
}

make_cgroups() {
  local h
  for h in $(hierarchies); do
    mkdir -p "$h/$cgname/daemons"
    if [ -f "$h/cpuset.cpus" ]; then
      cat "$h/cpuset.cpus" >"$h/$cgname/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h/$cgname/cpuset.mems"
      cat "$h/cpuset.cpus" >"$h/$cgname/daemons/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h/$cgname/daemons/cpuset.mems"
    fi
  done
}

make_network() {
  if ip -4 -o addr show | awk '{ print $4 }' | grep -q -E '^198\.1[89]\.'; then
    die "an address in 198.18.0.0/15 is already in use on this machine: $(ip -4 -o addr show | grep -E ' 198\.1[89]\.' | awk '{ print $2, $4 }' | tr '\n' ' ')"
  fi
  ip netns add "$netns"
  ip link add "$host_veth" type veth peer name eth0 netns "$netns"
  ip addr add "$host_ip/24" dev "$host_veth"
  ip link set "$host_veth" up
  in_node ip link set lo up
  in_node ip addr add "$node_ip/24" dev eth0
  in_node ip link set eth0 up
  ip route add "$routed" via "$node_ip" dev "$host_veth"
  # Inside the node's namespace only: pods route through it, and bridged traffic meets kube-proxy's
  # rules (both settings are per network namespace).
  in_node sysctl -q -w net.ipv4.ip_forward=1
  in_node sysctl -q -w net.bridge.bridge-nf-call-iptables=1
}

# start NAME COMMAND...: run COMMAND in the node's network namespace, in its own session, in the
# daemons' cgroups, with its output in logs/NAME.log.
start() {
  local name=$1 h
  shift
  (
    for h in $(hierarchies); do
      # Only the hierarchies where this shell sits at the root: the ones nothing else here manages.
      grep -q -x "$BASHPID" "$h/cgroup.procs" && echo "$BASHPID" >"$h/$cgname/daemons/cgroup.procs"
    done
    # Not the lock's descriptor: a daemon holding it would make every later up or down wait.
    exec 8>&-
    exec setsid nsenter --net="/run/netns/$netns" -- "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null
  ) &
  echo $! >"$dir/run/$name.pid"
  # Not a job of this shell: it reports nothing when down kills it.
  disown $!
}

# running NAME: the daemon NAME of this cluster is alive: started by this shell, or (from an earlier
# run) a live process whose command line names KUBE_DIR.
running() {
  local pid stat
  [ -f "$dir/run/$1.pid" ] && read -r pid <"$dir/run/$1.pid" && [ -n "$(alive "$pid")" ] || return 1
  read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
  stat="${stat##*) }"
  stat="${stat#* }"
  [ "${stat%% *}" = "$$" ] || tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -F "$dir/"
}

# wait_daemon SECONDS NAME WHAT COMMAND...: like wait_for, but fails at once when NAME has exited.
wait_daemon() {
  local limit=$1 name=$2 what=$3 end
  shift 3
  end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    running "$name" || {
      say "$name exited; the end of $dir/logs/$name.log:"
      tail -n 30 "$dir/logs/$name.log" >&2
      return 1
    }
    if [ "$SECONDS" -ge "$end" ]; then
      say "$what: not so after ${limit} s; the end of $dir/logs/$name.log:"
      tail -n 30 "$dir/logs/$name.log" >&2
      return 1
    fi
    sleep 0.2
  done
}

write_configs() {
  local e="$dir/etc"
  mkdir -p "$e/cni" "$dir/cni/ipam" "$dir/pod-logs"
  cat >"$e/containerd.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$dir/containerd/containerd.sock"
[ttrpc]
  address = "$dir/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # This VM withholds CAP_SYS_RESOURCE: without it every sandbox fails to lower its oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$dir/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$e/cni"
    max_conf_num = 1
EOF
  cat >"$e/cni/10-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$cni_network",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$pod_cidr", "gateway": "$pod_gateway" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$dir/cni/ipam"
      }
    }
  ]
}
EOF
  cat >"$e/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /$cgname
failSwapOn: false
failCgroupV1: false
address: $node_ip
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: false }
  x509: { clientCAFile: $dir/pki/ca.crt }
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS: [$node_ip]
resolvConf: ""
podLogsDir: $dir/pod-logs
volumePluginDir: $dir/kubelet/volume-plugins
registerNode: true
rotateCertificates: false
serverTLSBootstrap: false
# Imported images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
oomScoreAdj: 0
EOF
  cat >"$e/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $dir/kubeconfig
hostnameOverride: $node
mode: iptables
clusterCIDR: $pod_cidr
nodePortAddresses: [primary]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# conntrack's table size and timeouts are the machine's, not this namespace's: leave them.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
oomScoreAdj: 0
EOF
  cat >"$e/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind $node_ip
    errors
    health 127.0.0.1:18080
    ready 127.0.0.1:18181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $dir/kubeconfig
        pods insecure
        ttl 5
    }
}
# Nothing outside the cluster can be reached: any other name does not exist, so that a resolver
# goes on through its search list as it does on NXDOMAIN (it may stop on SERVFAIL).
.:53 {
    bind $node_ip
    errors
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
}

# all_running: every daemon is alive; says which one is not, with the end of its log.
all_running() {
  local name
  for name in "${daemons[@]}"; do
    running "$name" || {
      say "$name is not running; the end of $dir/logs/$name.log:"
      tail -n 20 "$dir/logs/$name.log" >&2 2>/dev/null
      return 1
    }
  done
}

record_tunables() {
  local t
  for t in "${tunables[@]}"; do
    [ -f "/proc/sys/$t" ] && echo "$t $(cat "/proc/sys/$t")"
  done >"$dir/tunables"
}

curl_api() {
  curl -fsS --max-time 5 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" "$apiserver$1"
}

node_ready() {
  [ "$(kc get node "$node" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

dns_answers() {
  busybox nslookup kubernetes.default.svc.cluster.local "$node_ip" 2>/dev/null | grep -q "$kubernetes_ip"
}

usable() {
  [ -f "$dir/up" ] && curl_api /readyz >/dev/null 2>&1 && node_ready && dns_answers
}

import_images() {
  local a name full
  [ $# -gt 0 ] || return 0
  for a in "$@"; do
    [ -f "$a" ] || die "no image archive $a"
    say "importing $a"
    ctr_ images import "$a" >/dev/null || die "ctr images import $a failed"
  done
  # kubelet asks for a short name (etcd-lifecycle-agent:0.1.0) by its full one
  # (docker.io/library/etcd-lifecycle-agent:0.1.0); an OCI archive's name is kept as written.
  ctr_ images ls -q | grep -v '^sha256:' | while read -r name; do
    case "${name%%/*}" in
    *.* | *:* | localhost) [ "${name#*/}" != "$name" ] && continue ;;
    esac
    case "$name" in */*) full="docker.io/$name" ;; *) full="docker.io/library/$name" ;; esac
    ctr_ images ls -q "name==$full" | grep -q . || ctr_ images tag "$name" "$full" >/dev/null
  done
}

storage_class() {
  kc apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $storage_class
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
EOF
}

# pvs COUNT: Released PVs emptied and Available again, then new ones until COUNT are Available.
pvs() {
  local want=$1 name phase path available=0 n
  case "$want" in '' | *[!0-9]*) die "pvs: COUNT must be a number, not '$want'" ;; esac
  while read -r name phase path; do
    [ -n "$name" ] || continue
    if [ "$phase" = Released ]; then
      case "$path" in "$dir"/pv/*) ;; *) die "PV $name has path $path, outside $dir/pv" ;; esac
      find "$path" -mindepth 1 -maxdepth 1 -exec rm -rf --one-file-system {} +
      kc patch pv "$name" --type json -p '[{"op":"remove","path":"/spec/claimRef"}]' >/dev/null
      phase=Available
    fi
    [ "$phase" = Available ] && available=$((available + 1))
  done < <(kc get pv -l "etcd-lifecycle-agent-kube/storage-class=$storage_class" \
    -o 'jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.spec.local.path}{"\n"}{end}')
  n=0
  while [ "$available" -lt "$want" ]; do
    n=$((n + 1))
    name="$storage_class-$(printf %02d "$n")"
    kc get pv "$name" >/dev/null 2>&1 && continue
    mkdir -p "$dir/pv/$name"
    kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $name
  labels:
    etcd-lifecycle-agent-kube/storage-class: $storage_class
spec:
  capacity: { storage: $pv_size }
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: $storage_class
  local: { path: $dir/pv/$name }
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - { key: kubernetes.io/hostname, operator: In, values: [$node] }
EOF
    available=$((available + 1))
  done
}

print_usage() {
  cat <<EOF
kube.sh: Kubernetes is up: node $node at $node_ip, API server $apiserver
  export KUBECONFIG=$dir/kubeconfig KUBECACHEDIR=$dir/kubectl-cache   (or: eval "\$(bash scripts/kube.sh env)")
  kubectl get nodes
  storage class $storage_class (default), $(kc get pv -o name 2>/dev/null | wc -l) PVs; logs in $dir/logs
  stop it and remove everything it made: bash scripts/kube.sh down
EOF
}

up() {
  local archives=("$@") bins coredns etcd_dir started=$SECONDS
  if [ -n "${KUBE_IMAGES:-}" ]; then
    # shellcheck disable=SC2206
    archives=(${KUBE_IMAGES} "${archives[@]}")
  fi
  if [ -f "$dir/up" ] && all_running; then
    usable || die "a cluster is up in $dir but not usable now (bash scripts/kube.sh status says why): down it first"
    say "reusing the cluster already up in $dir"
    import_images "${archives[@]}"
    pvs "$pv_count"
    print_usage
    return 0
  fi
  if [ -d "$dir" ] || [ -n "$(leftovers)" ]; then
    say "removing what a previous cluster left (a crashed or killed up, or no down)"
    teardown || die "could not remove it: see above"
  fi
  ensure_packages
  # The binaries and the sandbox image first: a first build takes many minutes, and nothing is made
  # before them.
  bins="$(bash scripts/kube-build.sh)"
  coredns="$(bash scripts/coredns.sh)"
  etcd_dir="$(bash scripts/etcd.sh "$etcd_version")"
  archives=("$(bash scripts/image.sh pause)" "${archives[@]}")

  [ ! -e "$dir" ] || die "$dir is in the way: it was not made by kube.sh, or down could not remove it"
  trap 'say "up did not finish: removing what it made"; teardown' EXIT
  trap 'exit 130' INT TERM HUP
  mkdir -p "$dir/logs" "$dir/run"
  touch "$dir/.kube-sh"
  [ -d /var/log/containers ] || touch "$dir/made-var-log-containers"
  [ -d /run/containerd ] || touch "$dir/made-run-containerd"
  [ -d /var/lib/cni ] || touch "$dir/made-var-lib-cni"
  [ -d /var/lib/kubelet ] || touch "$dir/made-var-lib-kubelet"
  make_pki
  kubeconfig "$dir/kubeconfig" admin
  kubeconfig "$dir/kubelet.kubeconfig" kubelet
  write_configs
  make_cgroups
  make_network

  local etcd_flags=()
  # grep reads all of it (no -q): a reader that quits early kills the writer with SIGPIPE, and
  # pipefail then fails the pipeline.
  "$etcd_dir/etcd" --help 2>&1 | grep -- --unsafe-no-fsync >/dev/null && etcd_flags+=(--unsafe-no-fsync)
  start etcd "$etcd_dir/etcd" --name kube --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
    --initial-cluster kube=http://127.0.0.1:12380 --listen-metrics-urls "" "${etcd_flags[@]}"
  start containerd containerd --config "$dir/etc/containerd.toml"
  wait_daemon 30 etcd "etcd answering" in_node curl -fsS "http://127.0.0.1:$etcd_port/health"
  start kube-apiserver "$bins/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --advertise-address "$node_ip" --bind-address "$node_ip" --secure-port 6443 \
    --client-ca-file "$dir/pki/ca.crt" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --kubelet-client-certificate "$dir/pki/admin.crt" --kubelet-client-key "$dir/pki/admin.key" \
    --kubelet-preferred-address-types InternalIP \
    --service-cluster-ip-range "$service_cidr" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --authorization-mode AlwaysAllow \
    --enable-admission-plugins NamespaceLifecycle,LimitRanger,ServiceAccount,PodSecurity,DefaultStorageClass,ResourceQuota \
    --allow-privileged=true --profiling=false
  wait_daemon 30 containerd "containerd answering" ctr_ version
  import_images "${archives[@]}"
  ctr_ images ls -q | grep -x -F "$pause_image" >/dev/null ||
    die "no $pause_image among the images imported (containerd's sandbox image): scripts/image.sh pause should make it"
  wait_daemon 90 kube-apiserver "the API server ready" curl_api /readyz
  start kube-controller-manager "$bins/kube-controller-manager" \
    --kubeconfig "$dir/kubeconfig" --bind-address 127.0.0.1 --leader-elect=false \
    --service-cluster-ip-range "$service_cidr" --cluster-name etcd-lifecycle-agent-kube \
    --root-ca-file "$dir/pki/ca.crt" --service-account-private-key-file "$dir/pki/sa.key" \
    --use-service-account-credentials=false --profiling=false \
    --flex-volume-plugin-dir "$dir/kubelet/volume-plugins"
  start kube-scheduler "$bins/kube-scheduler" \
    --kubeconfig "$dir/kubeconfig" --bind-address 127.0.0.1 --leader-elect=false --profiling=false
  record_tunables
  start kubelet "$bins/kubelet" --config "$dir/etc/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" --hostname-override "$node" --node-ip "$node_ip"
  start kube-proxy "$bins/kube-proxy" --config "$dir/etc/kube-proxy.yaml"
  start coredns "$coredns" -conf "$dir/etc/Corefile"
  storage_class
  pvs "$pv_count"
  wait_daemon 90 kubelet "the node Ready" node_ready
  wait_daemon 30 coredns "CoreDNS answering for kubernetes.default" dns_answers
  wait_daemon 30 kube-controller-manager "the default ServiceAccount made" kc get serviceaccount default -n default
  all_running
  touch "$dir/up"
  trap - EXIT INT TERM HUP
  say "up in $((SECONDS - started)) s"
  print_usage
}

# ---------------------------------------------------------------- KubeBlocks

kb_namespace=kb-system
kb_health=127.0.0.1:18081

# kubeblocks: KubeBlocks v1.0.2's controller (its manager, `bash scripts/kubeblocks.sh`) running
# against the cluster, as its Helm chart would run it but as one more daemon of this cluster (in the
# node's network namespace, so it reaches the API server and every pod IP, and `down` ends it):
# - its 28 CRDs from the same module, applied server-side (two are too big for a client-side apply);
# - the namespace kb-system (its CM_NAMESPACE, where the pods of Custom OpsRequests run, under the
#   ServiceAccount kubeblocks), and the ClusterRole kubeblocks-cluster-pod-role its Helm chart makes
#   and each Component's RoleBinding names (kbagent writes its probes' Events with it);
# - the manager: the apps, workloads, operations and parameters controllers (the Helm chart's; not
#   extensions, whose Addons fetch charts from outside), no leader election, no webhooks (they only
#   convert v1alpha1 objects; ENABLE_WEBHOOKS is unset), KUBEBLOCKS_TOOLS_IMAGE the tools image of
#   `bash scripts/image.sh kubeblocks-tools` (it must have been imported), images taken as they are
#   (IfNotPresent), in an empty working directory (it reads ./config.yaml) and an environment of its own.
# It waits until the manager reports ready. On a cluster where it already runs, it applies the CRDs
# and objects again and leaves the manager as it is.
kubeblocks() {
  local manager crds version tools images
  manager="$(bash scripts/kubeblocks.sh)" || die "KubeBlocks' manager could not be built (above)"
  crds="$(bash scripts/kubeblocks.sh crds)" || die "KubeBlocks' CRDs could not be found (above)"
  version="$(sed -n -E 's/^[[:space:]]*(require )?github\.com\/apecloud\/kubeblocks v([0-9][0-9A-Za-z.+-]*)( .*)?$/\2/p' tools/kubeblocks-1.0/go.mod | sed -n 1p)"
  tools="docker.io/library/kubeblocks-tools:$version"
  # A here-string, not a pipe: grep -q leaving early kills ctr (it writes line by line) with
  # SIGPIPE, and pipefail makes that a failure.
  images="$(ctr_ images ls -q)"
  grep -q -x -F "$tools" <<<"$images" ||
    die "the tools image $tools is not imported: bash scripts/kube.sh import \$(bash scripts/image.sh kubeblocks-tools)"
  kc apply --server-side --force-conflicts -f "$crds" >/dev/null
  # shellcheck disable=SC2046
  kc wait --for=condition=Established --timeout=120s $(kc get crd -o name | grep -F '.kubeblocks.io') >/dev/null
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $kb_namespace
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: kubeblocks
  namespace: $kb_namespace
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kubeblocks-cluster-pod-role
rules:
- apiGroups: [""]
  resources: [events]
  verbs: [create, get, update]
EOF
  if ! running kubeblocks-manager; then
    rm -rf "$dir/kubeblocks"
    mkdir -p "$dir/kubeblocks"
    start kubeblocks-manager env -i -C "$dir/kubeblocks" PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$dir/kubeblocks" \
      KUBECONFIG="$dir/kubeconfig" CM_NAMESPACE="$kb_namespace" KUBEBLOCKS_SERVICEACCOUNT_NAME=kubeblocks \
      KUBEBLOCKS_TOOLS_IMAGE="$tools" KUBEBLOCKS_IMAGE_PULL_POLICY=IfNotPresent \
      "$manager" --kubeconfig="$dir/kubeconfig" --apps=true --workloads=true --operations=true --parameters=true \
      --extensions=false --experimental=false --trace=false --leader-elect=false \
      --metrics-bind-address=0 --health-probe-bind-address="$kb_health" --zap-log-level=info
  fi
  wait_daemon 300 kubeblocks-manager "KubeBlocks' manager ready" in_node curl -sf "http://$kb_health/readyz"
  say "KubeBlocks v$version's manager runs (logs/kubeblocks-manager.log), tools image $tools"
}

status() {
  local name state=0
  if [ ! -d "$dir" ]; then
    echo "kube.sh: no cluster in $dir"
    return 1
  fi
  for name in "${daemons[@]}"; do
    if running "$name"; then
      echo "  $name: running (pid $(cat "$dir/run/$name.pid"))"
    else
      echo "  $name: not running"
      state=1
    fi
  done
  if usable; then
    echo "kube.sh: up and usable: export KUBECONFIG=$dir/kubeconfig KUBECACHEDIR=$dir/kubectl-cache"
    kc get nodes 2>&1 | sed 's/^/  /'
  else
    echo "kube.sh: not usable (the API server, the node or CoreDNS is not ready, or up has not finished)"
    state=1
  fi
  return "$state"
}

[ $# -ge 1 ] || usage
command=$1
shift
case "$command" in
up)
  need_root up
  exec 8>"$lock"
  flock 8
  up "$@"
  ;;
down)
  [ $# -eq 0 ] || usage
  need_root down
  exec 8>"$lock"
  flock 8
  started=$SECONDS
  teardown
  say "down in $((SECONDS - started)) s: nothing left"
  ;;
status)
  status
  ;;
env)
  [ -f "$dir/up" ] || die "no cluster is up in $dir: bash scripts/kube.sh up"
  echo "export KUBECONFIG=$dir/kubeconfig KUBECACHEDIR=$dir/kubectl-cache"
  ;;
kubeconfig)
  [ -f "$dir/up" ] || die "no cluster is up in $dir: bash scripts/kube.sh up"
  echo "$dir/kubeconfig"
  ;;
import)
  [ $# -ge 1 ] || usage
  need_root import
  [ -f "$dir/up" ] || die "no cluster is up in $dir: bash scripts/kube.sh up"
  import_images "$@"
  ;;
kubeblocks)
  [ $# -eq 0 ] || usage
  need_root kubeblocks
  [ -f "$dir/up" ] || die "no cluster is up in $dir: bash scripts/kube.sh up"
  exec 8>"$lock"
  flock 8
  kubeblocks
  ;;
pvs)
  [ $# -le 1 ] || usage
  need_root pvs
  [ -f "$dir/up" ] || die "no cluster is up in $dir: bash scripts/kube.sh up"
  exec 8>"$lock"
  flock 8
  pvs "${1:-$pv_count}"
  kc get pv -l "etcd-lifecycle-agent-kube/storage-class=$storage_class"
  ;;
*) usage ;;
esac
