#!/usr/bin/env bash
# Prints the path of Versity's S3 gateway versitygw, building it first when it is missing:
# `bash scripts/versitygw.sh`. The S3 backup store tests (test/helpers/s3-server.ts) run it as the
# real S3 server, its POSIX backend serving a temporary directory.
#   versitygw v1.8.0, built from the Go module proxy through the wrapper module tools/versitygw
#   (go.mod and go.sum only: none of its code and no binary is committed) into
#   ${VERSITYGW_CACHE_DIR:-~/.cache/etcd-lifecycle-agent}/versitygw-<version>/versitygw
# A second run builds nothing (a first build takes about 2 min on 2 cores with a cold Go cache).
# The binary's module version (`go version -m`: `mod github.com/versity/versitygw v1.8.0`) is
# checked against the wrapper's before the path is printed; anything else is a failure that says so
# (exit 1). Build output goes to stderr, so `bin="$(bash scripts/versitygw.sh)"` reads only the path.
set -euo pipefail
cd "$(dirname "$0")/.."

module=tools/versitygw
[ $# -eq 0 ] || {
  echo "usage: bash scripts/versitygw.sh" >&2
  exit 2
}
version="$(sed -n -E 's/^[[:space:]]*(require )?github\.com\/versity\/versitygw v([0-9][0-9A-Za-z.+-]*)( .*)?$/\2/p' "$module/go.mod" | sed -n 1p)"
[ -n "$version" ] || {
  echo "versitygw.sh: $module/go.mod requires no github.com/versity/versitygw version" >&2
  exit 1
}
command -v go >/dev/null 2>&1 || {
  echo "versitygw.sh: versitygw v$version is built (and its version checked) with Go, and there is no go on PATH" >&2
  exit 1
}
cache="${VERSITYGW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent}"
dir="$cache/versitygw-$version"
bin="$dir/versitygw"

# check BIN: BIN is versitygw built from github.com/versity/versitygw at $version.
check() {
  local info path mod
  if [ ! -x "$1" ]; then
    echo "versitygw.sh: $1 is missing" >&2
    return 1
  fi
  info="$(GOTOOLCHAIN=local go version -m "$1" 2>&1)" || {
    echo "versitygw.sh: go version -m $1 failed: $info" >&2
    return 1
  }
  # A here-string, not a pipe into an awk that exits early (SIGPIPE under pipefail).
  path="$(awk '$1 == "path" { print $2; exit }' <<<"$info")"
  mod="$(awk '$1 == "mod" && $2 == "github.com/versity/versitygw" { print $3; exit }' <<<"$info")"
  if [ "$path" != "github.com/versity/versitygw/cmd/versitygw" ] || [ "$mod" != "v$version" ]; then
    echo "versitygw.sh: $1 is '${path:-?}' of versitygw '${mod:-?}', expected github.com/versity/versitygw/cmd/versitygw of v$version" >&2
    return 1
  fi
}

if ! check "$bin" 2>/dev/null; then
  mkdir -p "$cache"
  # One build at a time per cache: a second caller waits, then finds the binary built.
  exec 9>"$cache/.versitygw.lock"
  flock 9
  if ! check "$bin" 2>/dev/null; then
    echo "versitygw.sh: building versitygw v$version from $module (a first build takes minutes)" >&2
    started=$SECONDS
    tmp="$(mktemp -d "$cache/.build-versitygw-$version.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    # GOTOOLCHAIN=local: build with this machine's Go, never download another one silently.
    (
      cd "$module"
      export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
      go build -trimpath -o "$tmp/versitygw" github.com/versity/versitygw/cmd/versitygw
    ) >&2
    check "$tmp/versitygw"
    rm -rf "${dir:?}"
    mv "$tmp" "$dir"
    trap - EXIT
    echo "versitygw.sh: built versitygw v$version in $((SECONDS - started)) s" >&2
  fi
fi
check "$bin"
echo "$bin"
