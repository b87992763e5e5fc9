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

module=tools/coredns-1.15
[ $# -eq 0 ] || {
  echo "usage: bash scripts/coredns.sh" >&2
  exit 2
}
version="$(sed -n -E 's/^[[:space:]]*(require )?github\.com\/coredns\/coredns v([0-9][0-9A-Za-z.+-]*)( .*)?$/\2/p' "$module/go.mod" | sed -n 1p)"
[ -n "$version" ] || {
  echo "coredns.sh: $module/go.mod requires no github.com/coredns/coredns version" >&2
  exit 1
}
command -v go >/dev/null 2>&1 || {
  echo "coredns.sh: CoreDNS v$version is built (and its version checked) with Go, and there is no go on PATH" >&2
  exit 1
}
cache="${COREDNS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/coredns}"
bin="$cache/$version/coredns"

# check BIN: BIN is CoreDNS built from github.com/coredns/coredns at $version.
check() {
  local info path mod said
  if [ ! -x "$1" ]; then
    echo "coredns.sh: $1 is missing" >&2
    return 1
  fi
  info="$(GOTOOLCHAIN=local go version -m "$1" 2>&1)" || {
    echo "coredns.sh: go version -m $1 failed: $info" >&2
    return 1
  }
  # Here-strings, not `printf | awk '{ …; exit }'`: awk leaving early would kill printf with SIGPIPE.
  path="$(awk '$1 == "path" { print $2; exit }' <<<"$info")"
  mod="$(awk '$1 == "mod" && $2 == "github.com/coredns/coredns" { print $3; exit }' <<<"$info")"
  if [ "$path" != "github.com/coredns/coredns" ] || [ "$mod" != "v$version" ]; then
    echo "coredns.sh: $1 is '${path:-?}' of coredns '${mod:-?}', expected github.com/coredns/coredns of v$version" >&2
    return 1
  fi
  said="$("$1" -version 2>&1 | sed -n -E 's/^CoreDNS-([0-9][0-9A-Za-z.+-]*).*/\1/p' | sed -n 1p)"
  if [ "$said" != "$version" ]; then
    echo "coredns.sh: $1 -version says '${said:-nothing}', expected $version" >&2
    return 1
  fi
}

if ! check "$bin" 2>/dev/null; then
  mkdir -p "$cache"
  # One build at a time per cache: a second caller waits, then finds the binary built.
  exec 9>"$cache/.lock"
  flock 9
  if ! check "$bin" 2>/dev/null; then
    echo "coredns.sh: building CoreDNS v$version from $module (a first build takes minutes)" >&2
    started=$SECONDS
    tmp="$(mktemp -d "$cache/.build-$version.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    # GOTOOLCHAIN=local: build with this machine's Go, never download another one silently.
    (
      cd "$module"
      export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
      go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" github.com/coredns/coredns
    ) >&2
    check "$tmp/coredns"
    rm -rf "${cache:?}/$version"
    mv "$tmp" "$cache/$version"
    trap - EXIT
    echo "coredns.sh: built CoreDNS v$version in $((SECONDS - started)) s" >&2
  fi
fi
check "$bin"
echo "$bin"
