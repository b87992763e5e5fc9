#!/usr/bin/env bash
# The whole suite: setup, then type check, lint and every jest test (unit and
# integration against real local etcd processes) on the machine's Node (20),
# then every jest test again on Node 24 LTS, the image's runtime (scripts/node24.sh
# installs it from the npm package pinned in tools/node24). Ends with one line
# adding up both runs; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
node24="$(bash scripts/node24.sh)"
summary="$(mktemp)"
trap 'rm -f "$summary"' EXIT
export JEST_SUMMARY_FILE="$summary"

status=0
echo "== node $(node --version): typecheck, lint, build, jest"
npm test || status=1
echo "== node $("$node24" --version): jest"
# Node 24 first on PATH too, so what the tests spawn (the CLI, the scripts' launcher) runs on it.
PATH="$(dirname "$node24"):$PATH" "$node24" node_modules/jest/bin/jest.js || status=1

read -r passed failed skipped < <(awk '{p += $1; f += $2; s += $3} END {print p + 0, f + 0, s + 0}' "$summary")
runs="$(wc -l <"$summary")"
if [ "$runs" -lt 2 ]; then
  failed=$((failed + 1)) # a run that ended before its summary (a crash) counts as a failure
  status=1
fi
echo
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$status"
