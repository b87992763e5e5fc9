#!/usr/bin/env bash
# Prints the path of KubeBlocks' controller manager, building it first when it is missing:
# `bash scripts/kubeblocks.sh`. The KubeBlocks stories (test/kube/kubeblocks-*.test.ts) run it as a
# process against the one-node cluster of scripts/kube.sh, as its Helm chart would run it in a pod.
#   the manager of KubeBlocks v1.0.2 (the release whose scale-out replayed memberJoin forever, and
#   the newest the Go module proxy serves), built from the Go module proxy through the wrapper module
#   tools/kubeblocks-1.0 (go.mod and go.sum only: KubeBlocks is AGPL-3.0, so none of its code and no
#   binary is committed) into
#   ${KUBEBLOCKS_CACHE_DIR:-~/.cache/etcd-lifecycle-agent/kubeblocks}/<version>/manager
# `bash scripts/kubeblocks.sh crds` prints instead the folder of that version's CRDs, from the same
# module (config/crd/bases in Go's module cache, downloaded when missing).
# A second run builds nothing. The binary's module version is checked against the wrapper's before
# the path is printed; anything else is a failure that says so (exit 1). Build output goes to
# stderr, so `bin="$(bash scripts/kubeblocks.sh)"` reads only the path.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/go-tool.sh

wrapper=tools/kubeblocks-1.0
module=github.com/apecloud/kubeblocks
version="$(go_tool_version "$wrapper" "$module")"
case "${1:-manager}" in
  manager)
    cache="${KUBEBLOCKS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/kubeblocks}"
    go_tool_build manager "$wrapper" "$module" "$module/cmd/manager" "$cache/$version"
    ;;
  crds)
    dir="$(cd "$wrapper" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go mod download -json "$module@v$version" |
      sed -n -E 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p')"
    [ -d "$dir/config/crd/bases" ] || {
      echo "kubeblocks.sh: $module@v$version has no config/crd/bases (module folder: '${dir:-none}')" >&2
      exit 1
    }
    echo "$dir/config/crd/bases"
    ;;
  *)
    echo "usage: bash scripts/kubeblocks.sh [manager|crds]" >&2
    exit 2
    ;;
esac
