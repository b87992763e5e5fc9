#!/usr/bin/env bash
# The whole suite: setup (which also builds dist/ and the etcd versions), then on the machine's Node
# (20) the type check, lint and the unit tests, then on Node 24 LTS, the image's runtime
# (scripts/node24.sh installs it from the npm package pinned in tools/node24), the unit tests again
# and the integration tests against real local etcd processes: every file on etcd 3.6 (the default,
# what KubeBlocks and kubeadm ship), and the files whose result depends on etcd's version
# (test/helpers/etcd-versions.js) on 3.4, 3.5 and 3.7 as well, in the same jest run. Then, as a
# stage of its own, the kit's stories on a real one-node Kubernetes (jest project kube, test/kube:
# it builds the images and starts the cluster, runs one story at a time, and removes the cluster;
# it needs root, and a missing prerequisite is a failure that says so).
# ETCD_TEST_VERSIONS=3.6,3.4 narrows the integration tests' versions (the first runs every file);
# the Kubernetes stories run on the etcd versions they name, whatever it says.
# Prints a summary per etcd version and ends with one line adding up everything; a version that
# cannot be built or does not start is a failure that says so, and so is a jest worker that had to be
# force-exited (a handle left open). Exits non-zero on any failure.
#
# `bash scripts/test.sh --quick` is the developer's loop: the type check, lint and format check on the
# machine's Node, then on Node 24 the unit tests and the integration files that cover the HTTP API
# (QUICK in test/helpers/etcd-versions.js) on etcd 3.6 alone, and not the Kubernetes stories. The
# full command stays the gate.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *)
    echo "usage: bash scripts/test.sh [--quick]" >&2
    exit 2
    ;;
esac
if [ "$quick" -eq 1 ]; then
  export ETCD_TEST_QUICK=1
  export ETCD_TEST_VERSIONS="${ETCD_TEST_VERSIONS:-3.6}"
fi
bash scripts/setup.sh
node24="$(bash scripts/node24.sh)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

status=0
missing=0
versions=()
IFS=, read -r -a asked <<<"${ETCD_TEST_VERSIONS:-3.6,3.4,3.5,3.7}"
for v in "${asked[@]}"; do
  # Built by setup already when Go is here; this checks each binary's version again.
  if dir="$(bash scripts/etcd.sh "$v")"; then
    export "ETCD_DIR_${v/./_}=$dir"
    versions+=("$v")
  else
    echo "-- etcd $v: could not be had (bash scripts/etcd.sh $v failed above); its tests count as one failure"
    missing=$((missing + 1))
    status=1
  fi
done
if [ "${#versions[@]}" -eq 0 ]; then
  echo "tests: 0 passed, ${missing} failed, 0 skipped"
  exit 1
fi

echo "== node $(node --version): typecheck, lint, format check, unit tests"
# Side by side (each is mostly one busy process, and together they take ~20 s instead of ~35 s on
# 2 cores); each one's output is printed whole once they are all done.
npm run --silent typecheck >"$out/typecheck" 2>&1 &
typecheck=$!
npm run --silent lint >"$out/lint" 2>&1 &
lint=$!
npm run --silent format:check >"$out/format" 2>&1 &
format=$!
if [ "$quick" -eq 1 ]; then
  # One Node: the unit tests run once, on Node 24, with the integration files below.
  echo "(quick: the unit tests run on Node 24 only)" >"$out/unit"
  : >"$out/summary-node20.skip"
  true &
else
  JEST_SUMMARY_FILE="$out/summary-node20" npm run --silent test:unit >"$out/unit" 2>&1 &
fi
unit=$!
for step in typecheck lint format unit; do
  if ! wait "${!step}"; then
    status=1
    echo "-- ${step}: failed"
  fi
  cat "$out/$step"
done

joined="$(IFS=,; echo "${versions[*]}")"
echo "== node $("$node24" --version): unit tests, integration tests on etcd ${joined}"
# Node 24 first on PATH too, so what the tests spawn (the CLI, the scripts' launcher) runs on it.
PATH="$(dirname "$node24"):$PATH" JEST_SUMMARY_FILE="$out/summary-node24" ETCD_TEST_VERSIONS="$joined" \
  "$node24" node_modules/jest/bin/jest.js --ignoreProjects kube 2>&1 | tee "$out/node24" || status=1

kube_exit=0
if [ "$quick" -eq 1 ]; then
  echo "(quick: the Kubernetes stories are not run)" >"$out/kube"
  : >"$out/summary-kube.skip"
else
  echo "== node $("$node24" --version): the Kubernetes stories (test/kube, on the cluster of scripts/kube.sh)"
  # After the integration tests, not beside them: the cluster takes a core and a GB while it is up.
  # One story at a time (the kube project's runner is serial). jest exits non-zero without a failed
  # story when its global setup or teardown failed (kube.sh down left something behind): that counts.
  PATH="$(dirname "$node24"):$PATH" JEST_SUMMARY_FILE="$out/summary-kube" \
    "$node24" node_modules/jest/bin/jest.js --selectProjects kube --runInBand 2>&1 | tee "$out/kube" || kube_exit=$?
  [ "$kube_exit" -eq 0 ] || status=1
fi

# A jest worker still running 5 s after it was told to end (workerGracefulExitTimeout in
# jest.config.js) holds something open: jest kills it and says so. That is a failure here.
for run in unit node24 kube; do
  if grep -q 'failed to exit gracefully' "$out/$run"; then
    echo "-- jest ($run): a worker was force-exited: a test or the agent left a handle open"
    echo "0 1 0 workers force-exited ($run)" >>"$out/summary-all"
    status=1
  fi
done

# Each jest run writes its summary rows ("passed failed skipped group") last; a run that ended
# before writing them (a crash) counts as one failure.
for run in node20 node24 kube; do
  [ -e "$out/summary-$run.skip" ] && continue
  if [ ! -s "$out/summary-$run" ]; then
    echo "0 1 0 $run-crashed" >>"$out/summary-all"
    status=1
  else
    sed "s/ unit$/ unit on $run/" "$out/summary-$run" >>"$out/summary-all"
  fi
done
if [ "$kube_exit" -ne 0 ] && [ -s "$out/summary-kube" ] && ! awk '$2 > 0 { f = 1 } END { exit !f }' "$out/summary-kube"; then
  echo "-- jest (kube): exited $kube_exit with no failed story: its global setup or teardown failed (see above)"
  echo "0 1 0 kube (setup or teardown)" >>"$out/summary-all"
fi
for v in "${asked[@]}"; do
  case " ${versions[*]} " in *" $v "*) ;; *) echo "0 1 0 etcd $v (not available)" >>"$out/summary-all" ;; esac
done

echo
echo "summary:"
awk '{g = $4; for (i = 5; i <= NF; i++) g = g " " $i; p[g] += $1; f[g] += $2; s[g] += $3; if (!(g in seen)) {seen[g] = 1; order[++n] = g}}
     END {for (i = 1; i <= n; i++) printf "  %-28s %5d passed, %d failed, %d skipped\n", order[i] ":", p[order[i]], f[order[i]], s[order[i]]}' "$out/summary-all"
read -r passed failed skipped < <(awk '{p += $1; f += $2; s += $3} END {print p + 0, f + 0, s + 0}' "$out/summary-all")
[ "$failed" -eq 0 ] || status=1
echo
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$status"
