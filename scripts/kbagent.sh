#!/usr/bin/env bash
# Prints the path of KubeBlocks' kbagent binary, building it first when it is missing:
# `bash scripts/kbagent.sh`. The end-to-end test (test/integration/kbagent-e2e.test.ts) runs it, and
# the Kubernetes stories put it in the tools image KubeBlocks' controller injects into its pods.
#   kbagent v1.0.2 (the newest v1.0.x the Go module proxy serves), built from the Go module proxy
#   through the wrapper module tools/kbagent-1.0 (go.mod and go.sum only: KubeBlocks is AGPL-3.0, so
#   none of its code and no binary is committed) into
#   ${KBAGENT_CACHE_DIR:-~/.cache/etcd-lifecycle-agent/kbagent}/<version>/kbagent
# A second run builds nothing (a first build takes about 4 min on 2 cores with a cold Go cache).
# The binary's module version (`go version -m`: `mod github.com/apecloud/kubeblocks v1.0.2`) is
# checked against the wrapper's before the path is printed; anything else is a failure that says so
# (exit 1). Build output goes to stderr, so `bin="$(bash scripts/kbagent.sh)"` reads only the path.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/go-tool.sh

wrapper=tools/kbagent-1.0
[ $# -eq 0 ] || [ "$1" = "1.0" ] || {
  echo "usage: bash scripts/kbagent.sh [1.0]" >&2
  exit 2
}
version="$(go_tool_version "$wrapper" github.com/apecloud/kubeblocks)"
cache="${KBAGENT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/kbagent}"
go_tool_build kbagent "$wrapper" github.com/apecloud/kubeblocks github.com/apecloud/kubeblocks/cmd/kbagent "$cache/$version"
