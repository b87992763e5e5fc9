#!/usr/bin/env bash
# Prints the folder holding etcd, etcdctl (and from 3.5 etcdutl) of one etcd minor version, building
# it first when it is missing: `bash scripts/etcd.sh 3.6`.
#   3.4          Debian's etcd-server and etcd-client (3.4.23; installed with apt when missing, as root)
#   3.5 3.6 3.7  built from the Go module proxy through the wrapper module tools/etcd-<minor>
#                (go.mod and go.sum only: it pins the three etcd modules at one patch release) into
#                ${ETCD_CACHE_DIR:-~/.cache/etcd-lifecycle-agent/etcd}/<version>/
# A second run builds nothing. Every binary's version is checked against the pinned one (`etcd
# --version`, `etcdctl version`, `etcdutl version`) before the folder is printed; anything else is a
# failure that says so (exit 1). Build output goes to stderr, so `bin="$(bash scripts/etcd.sh 3.6)"`
# reads only the folder. A new version: a tools/etcd-<minor>/go.mod like the others, `go mod tidy`
# there, and its row in scripts/etcd-version.ts.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: bash scripts/etcd.sh <3.4|3.5|3.6|3.7>" >&2
  exit 2
}
[ $# -eq 1 ] || usage
minor=$1

# check DIR VERSION BIN...: each binary in DIR says it is VERSION (`etcd --version`; etcdctl and
# etcdutl print theirs with `version`: their --version is an unknown flag or the whole help).
check() {
  local dir=$1 want=$2 bin got ask
  shift 2
  for bin in "$@"; do
    if [ ! -x "$dir/$bin" ]; then
      echo "etcd.sh: $dir/$bin is missing" >&2
      return 1
    fi
    ask=version
    [ "$bin" = etcd ] && ask=--version
    got="$("$dir/$bin" "$ask" 2>&1 | sed -n -E 's/^(etcd|etcdctl|etcdutl) [Vv]ersion: *([0-9.]+).*/\2/p' | sed -n 1p)"
    if [ "$got" != "$want" ]; then
      echo "etcd.sh: $dir/$bin --version says '${got:-nothing}', expected $want" >&2
      return 1
    fi
  done
}

if [ "$minor" = "3.4" ]; then
  if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "etcd.sh: etcd 3.4 is missing: run as root, or apt-get install -y etcd-server etcd-client" >&2
      exit 1
    fi
    echo "etcd.sh: installing etcd 3.4 from Debian (etcd-server, etcd-client)" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >&2
  fi
  dir="$(dirname "$(command -v etcd)")"
  version="$("$dir/etcd" --version | sed -n -E 's/^etcd Version: *([0-9.]+).*/\1/p')"
  case "$version" in
  3.4.*) ;;
  *)
    echo "etcd.sh: $dir/etcd is etcd '${version:-?}', not 3.4" >&2
    exit 1
    ;;
  esac
  check "$dir" "$version" etcd etcdctl
  echo "$dir"
  exit 0
fi

module="tools/etcd-$minor"
[ -f "$module/go.mod" ] || usage
version="$(sed -n -E 's/^[[:space:]]*go\.etcd\.io\/etcd\/server\/v3 v([0-9][0-9.]*)( .*)?$/\1/p' "$module/go.mod" | sed -n 1p)"
[ -n "$version" ] || {
  echo "etcd.sh: $module/go.mod pins no go.etcd.io/etcd/server/v3 version" >&2
  exit 1
}
cache="${ETCD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/etcd}"
dir="$cache/$version"
bins=(etcd etcdctl etcdutl)

if ! check "$dir" "$version" "${bins[@]}" 2>/dev/null; then
  mkdir -p "$cache"
  # One build at a time per cache: a second caller waits, then finds the folder built.
  exec 9>"$cache/.lock"
  flock 9
  if ! check "$dir" "$version" "${bins[@]}" 2>/dev/null; then
    command -v go >/dev/null 2>&1 || {
      echo "etcd.sh: etcd $version must be built from the Go module proxy, and there is no go on PATH" >&2
      exit 1
    }
    echo "etcd.sh: building etcd $version (etcd, etcdctl, etcdutl) from $module" >&2
    started=$SECONDS
    tmp="$(mktemp -d "$cache/.build-$version.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    ldflags="-X go.etcd.io/etcd/api/v3/version.GitSHA=v$version-module-proxy"
    # GOTOOLCHAIN=local: build with this machine's Go, never download another one silently.
    (
      cd "$module"
      export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
      go build -trimpath -ldflags "$ldflags" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
      go build -trimpath -ldflags "$ldflags" -o "$tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3
      go build -trimpath -ldflags "$ldflags" -o "$tmp/etcdutl" go.etcd.io/etcd/etcdutl/v3
    ) >&2
    check "$tmp" "$version" "${bins[@]}"
    rm -rf "$dir"
    mv "$tmp" "$dir"
    trap - EXIT
    echo "etcd.sh: built etcd $version in $((SECONDS - started)) s" >&2
  fi
fi
check "$dir" "$version" "${bins[@]}"
echo "$dir"
