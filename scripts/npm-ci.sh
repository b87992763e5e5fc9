#!/usr/bin/env bash
# `npm ci` in a folder of this project (default: the project itself; scripts/node24.sh passes
# tools/node24), only when its node_modules is missing or older than its package-lock.json.
# The tree npm ci makes from a lock file is kept once per machine, keyed by the lock file's hash,
# the platform and the Node ABI:
#   ${NODE_MODULES_CACHE_DIR:-~/.cache/etcd-lifecycle-agent/node_modules}/<key>/node_modules
# and a fresh clone copies it (~1 s) instead of extracting every package again (~20 s on 2 cores).
# Trees of older lock files stay (~190 MB each) until that folder is deleted; nothing needs them.
# The copy lands in the clone itself, so what the tests run from it is as readable as the clone (a
# test runs the agent as the user nobody, who cannot enter /root). Prints nothing on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.}"
cd "$dir"
stamp=node_modules/.package-lock.json
if [ -f "$stamp" ] && ! [ package-lock.json -nt "$stamp" ]; then
  exit 0
fi
key="$(sha256sum package-lock.json | cut -c1-16)-$(node -p 'process.platform + "-" + process.arch + "-abi" + process.versions.modules')"
kept="${NODE_MODULES_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent/node_modules}/$key"
if [ -f "$kept/node_modules/.package-lock.json" ]; then
  echo "npm-ci: $dir/node_modules from $kept (npm ci of this lock file, made on this machine)" >&2
  rm -rf node_modules
  cp -a "$kept/node_modules" node_modules
else
  echo "npm-ci: npm ci in $dir" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
  mkdir -p "$(dirname "$kept")"
  # Copied whole, then renamed into place: a reader never sees half a tree. Never deleted here
  # (another clone's setup may be copying it); a second writer's copy is dropped.
  tmp="$(mktemp -d "$kept.XXXXXX")"
  cp -a node_modules "$tmp/node_modules" && mv -T "$tmp" "$kept" 2>/dev/null || rm -rf "$tmp"
fi
# Newer than the lock file, which a fresh checkout has just written.
touch "$stamp"
