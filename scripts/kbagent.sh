#!/usr/bin/env bash
# Prints the path of KubeBlocks' kbagent binary, building it first when it is missing:
# `bash scripts/kbagent.sh`. The end-to-end test (test/integration/kbagent-e2e.test.ts) runs it.
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

module=tools/kbagent-1.0
[ $# -eq 0 ] || [ "$1" = "1.0" ] || {
  echo "usage: bash scripts/kbagent.sh [1.0]" >&2
  exit 2
}
version="$(sed -n -E 's/^[[:space:]]*github\.com\/apecloud\/kubeblocks v([0-9][0-9A-Za-z.+-]*)( .*)?$/\1/p' "$module/go.mod" | sed -n 1p)"
[ -n "$version" ] || {
  echo "kbagent.sh: $module/go.mod requires no github.com/apecloud/kubeblocks version" >&2
  exit 1
}
command -v go >/dev/null 2>&1 || {
  echo "kbagent.sh: kbagent v$version is built (and its version checked) with Go, and there is no go on PATH" >&2
  exit 1
}
cache="${KBAGENT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/kbagent}"
bin="$cache/$version/kbagent"

# check BIN: BIN is kbagent built from github.com/apecloud/kubeblocks at $version.
check() {
  local info path mod
  if [ ! -x "$1" ]; then
    echo "kbagent.sh: $1 is missing" >&2
    return 1
  fi
  info="$(GOTOOLCHAIN=local go version -m "$1" 2>&1)" || {
    echo "kbagent.sh: go version -m $1 failed: $info" >&2
    return 1
  }
  # A here-string, not `printf | awk '{ …; exit }'`: awk leaving before printf has written all of
  # kbagent's long module list killed printf with SIGPIPE, and pipefail made that this script's exit 141.
  path="$(awk '$1 == "path" { print $2; exit }' <<<"$info")"
  mod="$(awk '$1 == "mod" && $2 == "github.com/apecloud/kubeblocks" { print $3; exit }' <<<"$info")"
  if [ "$path" != "github.com/apecloud/kubeblocks/cmd/kbagent" ] || [ "$mod" != "v$version" ]; then
    echo "kbagent.sh: $1 is '${path:-?}' of kubeblocks '${mod:-?}', expected github.com/apecloud/kubeblocks/cmd/kbagent of v$version" >&2
    return 1
  fi
}

if ! check "$bin" 2>/dev/null; then
  mkdir -p "$cache"
  # One build at a time per cache: a second caller waits, then finds the binary built.
  exec 9>"$cache/.lock"
  flock 9
  if ! check "$bin" 2>/dev/null; then
    echo "kbagent.sh: building kbagent v$version from $module (a first build takes minutes)" >&2
    started=$SECONDS
    tmp="$(mktemp -d "$cache/.build-$version.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    # GOTOOLCHAIN=local: build with this machine's Go, never download another one silently.
    (
      cd "$module"
      export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
      go build -trimpath -o "$tmp/kbagent" github.com/apecloud/kubeblocks/cmd/kbagent
    ) >&2
    check "$tmp/kbagent"
    rm -rf "${cache:?}/$version"
    mv "$tmp" "$cache/$version"
    trap - EXIT
    echo "kbagent.sh: built kbagent v$version in $((SECONDS - started)) s" >&2
  fi
fi
check "$bin"
echo "$bin"
