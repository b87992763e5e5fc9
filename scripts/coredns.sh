#!/usr/bin/env bash
# Prints the path of the CoreDNS binary, building it first when it is missing:
# `bash scripts/coredns.sh`. The one-node Kubernetes of scripts/kube.sh runs it on the node's address.
#   CoreDNS v1.15.0, built from the Go module proxy through the wrapper module tools/coredns-1.15
#   (go.mod and go.sum only) into
#   ${COREDNS_CACHE_DIR:-~/.cache/etcd-lifecycle-agent/coredns}/<version>/coredns
# A second run builds nothing. The binary's module version (`go version -m`: `mod
# github.com/coredns/coredns v1.15.0`) and its own `-version` (`CoreDNS-1.15.0`) are checked against
# the wrapper's before the path is printed; anything else is a failure that says so (exit 1). Build
# output goes to stderr, so `bin="$(bash scripts/coredns.sh)"` reads only the path.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/go-tool.sh

wrapper=tools/coredns-1.15
[ $# -eq 0 ] || {
  echo "usage: bash scripts/coredns.sh" >&2
  exit 2
}
version="$(go_tool_version "$wrapper" github.com/coredns/coredns)"
# Its own word too: a binary of another build with the same module record would say another version.
go_tool_extra_check() {
  local said
  said="$("$1" -version 2>&1 | sed -n -E 's/^CoreDNS-([0-9][0-9A-Za-z.+-]*).*/\1/p' | sed -n 1p)"
  if [ "$said" != "$version" ]; then
    echo "coredns: $1 -version says '${said:-nothing}', expected $version" >&2
    return 1
  fi
}
cache="${COREDNS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/coredns}"
go_tool_build coredns "$wrapper" github.com/coredns/coredns github.com/coredns/coredns "$cache/$version" "-s -w"
