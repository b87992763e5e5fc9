#!/usr/bin/env bash
# The whole suite: setup (which also builds dist/), then on the machine's Node (20) the type check,
# lint and the unit tests, then on Node 24 LTS, the image's runtime (scripts/node24.sh installs it
# from the npm package pinned in tools/node24), the unit tests again and the integration tests
# (real local etcd processes), which run once, there: they exercise the runtime the image ships,
# and the Node-version-dependent logic is in the unit tests, which run on both. Ends with one line
# adding up both jest runs; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
node24="$(bash scripts/node24.sh)"
summary="$(mktemp)"
out="$(mktemp -d)"
trap 'rm -rf "$summary" "$out"' EXIT
export JEST_SUMMARY_FILE="$summary"
# Each jest run appends one summary line; a run that ended before its line (a crash) is a failure.
runs_expected=2

status=0
echo "== node $(node --version): typecheck, lint, unit tests"
# Side by side (each is mostly one busy process, and together they take ~20 s instead of ~35 s on
# 2 cores); each one's output is printed whole once they are all done.
npm run --silent typecheck >"$out/typecheck" 2>&1 &
typecheck=$!
npm run --silent lint >"$out/lint" 2>&1 &
lint=$!
npm run --silent test:unit >"$out/unit" 2>&1 &
unit=$!
for step in typecheck lint unit; do
  if ! wait "${!step}"; then
    status=1
    echo "-- ${step}: failed"
  fi
  cat "$out/$step"
done
echo "== node $("$node24" --version): unit and integration tests"
# Node 24 first on PATH too, so what the tests spawn (the CLI, the scripts' launcher) runs on it.
PATH="$(dirname "$node24"):$PATH" "$node24" node_modules/jest/bin/jest.js || status=1

read -r passed failed skipped < <(awk '{p += $1; f += $2; s += $3} END {print p + 0, f + 0, s + 0}' "$summary")
runs="$(wc -l <"$summary")"
if [ "$runs" -lt "$runs_expected" ]; then
  failed=$((failed + runs_expected - runs)) # each run that ended before its summary counts as one failure
  status=1
fi
echo
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$status"
