#!/usr/bin/env bash
# Prints the folder holding Kubernetes' own binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy, and kubectl for the KubeBlocks tools image), building them
# first when they are missing:
# `bash scripts/kube-build.sh`. They are built from the Go module proxy through the wrapper module
# tools/kubernetes-1.34 (go.mod and go.sum only) into
#   ${KUBE_CACHE_DIR:-~/.cache/etcd-lifecycle-agent/kubernetes}/<version>/
# A second run builds nothing. Each binary's `--version` is checked against the wrapper's pinned
# version before the folder is printed; anything else is a failure that says so (exit 1). Build output
# goes to stderr, so `dir="$(bash scripts/kube-build.sh)"` reads only the folder.
set -euo pipefail
cd "$(dirname "$0")/.."

module=tools/kubernetes-1.34
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
version="$(sed -n -E 's/^[[:space:]]*(require )?k8s\.io\/kubernetes (v[0-9.]+)( .*)?$/\2/p' "$module/go.mod" | sed -n 1p)"
[ -n "$version" ] || {
  echo "kube-build.sh: $module/go.mod requires no k8s.io/kubernetes version" >&2
  exit 1
}
command -v go >/dev/null 2>&1 || {
  echo "kube-build.sh: Kubernetes $version is built with Go, and there is no go on PATH" >&2
  exit 1
}
cache="${KUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/kubernetes}"
dir="$cache/$version"

# check DIR: every binary in DIR says it is Kubernetes $version.
check() {
  local bin got
  for bin in "${binaries[@]}"; do
    if [ ! -x "$1/$bin" ]; then
      echo "kube-build.sh: $1/$bin is missing" >&2
      return 1
    fi
    # kubectl has no --version: its client version says the same.
    if [ "$bin" = kubectl ]; then
      got="$("$1/$bin" version --client 2>&1 | sed -n -E 's/^Client Version: (v[0-9.]+).*/\1/p')"
    else
      got="$("$1/$bin" --version 2>&1 | sed -n -E 's/^Kubernetes (v[0-9.]+).*/\1/p')"
    fi
    if [ "$got" != "$version" ]; then
      echo "kube-build.sh: $1/$bin --version says '${got:-nothing}', expected $version" >&2
      return 1
    fi
  done
}

if ! check "$dir" 2>/dev/null; then
  mkdir -p "$cache"
  # One build at a time per cache: a second caller waits, then finds the binaries built.
  exec 9>"$cache/.lock"
  flock 9
  if ! check "$dir" 2>/dev/null; then
    echo "kube-build.sh: building Kubernetes $version from $module (a first build takes many minutes)" >&2
    started=$SECONDS
    tmp="$(mktemp -d "$cache/.build-$version.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    # The version the binaries report comes from the linker, as Kubernetes' own build sets it.
    ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1"
    ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
    (
      cd "$module"
      export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
      for bin in "${binaries[@]}"; do
        go build -trimpath -ldflags "$ldflags" -o "$tmp/$bin" "k8s.io/kubernetes/cmd/$bin"
        echo "kube-build.sh: $bin built after $((SECONDS - started)) s" >&2
      done
    ) >&2
    check "$tmp"
    rm -rf "${cache:?}/$version"
    mv "$tmp" "$dir"
    trap - EXIT
    echo "kube-build.sh: built Kubernetes $version in $((SECONDS - started)) s" >&2
  fi
fi
check "$dir"
echo "$dir"
