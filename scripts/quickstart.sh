#!/usr/bin/env bash
# Quick start: install what is missing, build, start a local 3-member etcd
# cluster on loopback, and run the agent against it in the foreground.
# Ctrl-C (or SIGTERM) stops the agent and the cluster.
#   ETCD_VERSION=3.4|3.5|3.6|3.7  the etcd it runs: default 3.6 where Go can build it
#                                 (scripts/etcd.sh), else Debian's 3.4, and it says so
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

if [ -z "${ETCD_VERSION:-}" ]; then
  if command -v go >/dev/null 2>&1; then
    ETCD_VERSION=3.6
  else
    ETCD_VERSION=3.4
    echo "quickstart: no Go on this machine, so etcd 3.6 cannot be built: running Debian's etcd 3.4 (out of support upstream)"
  fi
fi
minor=$(echo "$ETCD_VERSION" | cut -d. -f1,2)
etcd_dir=$(bash scripts/etcd.sh "$minor") || {
  echo "quickstart: etcd $minor is not available (bash scripts/etcd.sh $minor failed, see above)" >&2
  exit 1
}
etcd_version=$("$etcd_dir/etcd" --version | sed -n 's/^etcd Version: *//p')
# The local cluster runs this one; scripts/etcd-version.ts reads both.
export ETCD_VERSION=$minor
export "ETCD_DIR_${minor/./_}=$etcd_dir"
echo "quickstart: etcd $etcd_version ($etcd_dir)"

dir=${QUICKSTART_DIR:-.local-cluster}
listen=${ETCD_AGENT_LISTEN:-127.0.0.1:3501}
mkdir -p "$dir"
rm -f "$dir/endpoints"

node dist/scripts/local-cluster.js start --size 3 --dir "$dir" >"$dir/cluster.out" 2>&1 &
cluster_pid=$!
agent_pid=""
cleanup() {
  trap - EXIT INT TERM
  [ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
  kill -TERM "$cluster_pid" 2>/dev/null && wait "$cluster_pid" 2>/dev/null || true
  echo "quickstart: stopped"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

for _ in $(seq 1 300); do
  [ -s "$dir/endpoints" ] && break
  if ! kill -0 "$cluster_pid" 2>/dev/null; then
    echo "quickstart: the local etcd cluster did not start:" >&2
    cat "$dir/cluster.out" >&2
    exit 1
  fi
  sleep 0.1
done
[ -s "$dir/endpoints" ] || { echo "quickstart: etcd did not start within 30 s" >&2; exit 1; }
endpoints=$(cat "$dir/endpoints")
first=${endpoints%%,*}

ETCD_AGENT_LISTEN=$listen \
ETCD_AGENT_ENDPOINTS=$endpoints \
ETCD_AGENT_LOCAL_ENDPOINT=$first \
ETCD_AGENT_MEMBER_NAME=etcd-0 \
  dist/bin/etcd-lifecycle-agent.js serve >"$dir/agent.log" 2>&1 &
agent_pid=$!

url="http://$listen"
for _ in $(seq 1 100); do
  if node -e "fetch('$url/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))" 2>/dev/null; then break; fi
  if ! kill -0 "$agent_pid" 2>/dev/null; then
    echo "quickstart: the agent did not start:" >&2
    cat "$dir/agent.log" >&2
    exit 1
  fi
  sleep 0.1
done

cat <<MSG

etcd-lifecycle-agent is listening on $url
etcd $etcd_version members (3, on loopback): $endpoints
agent log: $dir/agent.log   etcd logs: $dir/logs/

Try:
  curl -s $url/readyz
  curl -s $url/v1/health
  curl -s $url/v1/members
  curl -s -X POST $url/v1/members/join -H 'Content-Type: application/json' \\
       -d '{"name":"etcd-3","peerURLs":["http://127.0.0.1:2390"]}'      # added (learner); again: in-progress
  curl -s -X POST $url/v1/members/leave -H 'Content-Type: application/json' \\
       -d '{"name":"etcd-3","peerURLs":["http://127.0.0.1:2390"]}'      # removed; again: already-absent
  (etcd-3 never started, so etcd lists it without a name: it is found by its peer URL)
  dist/bin/etcd-lifecycle-agent.js health --agent $url

Ctrl-C stops the agent and the cluster.
MSG
wait "$agent_pid"
