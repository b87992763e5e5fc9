#!/bin/sh
# member-join.sh: drop-in replacement of the KubeBlocks etcd addon's memberJoin
# script (docs/api.md §7). It runs no etcdctl: it asks this pod's etcd-lifecycle-agent
# to make KB_JOIN_MEMBER_POD_NAME a voting member.
#
# Reads (as the addon's script): KB_JOIN_MEMBER_POD_NAME (required),
#   KB_JOIN_MEMBER_POD_FQDN (optional: peer URL {scheme}://{host}:2380, where host
#   is the FQDN, or the pod's address in PEER_ENDPOINT (the addon's LoadBalancer /
#   host-network mode), and scheme comes from ETCD_PEER_SCHEME, else the addon's
#   TLS_ENABLED and PEER_TLS, else ETCD_AGENT_PEER_URL_TEMPLATE's scheme, else http:
#   see member-common.sh, which must sit beside this script; without a host the
#   agent derives the peer URL from its template).
#   Other KB_* variables KubeBlocks sets (KB_JOIN_MEMBER_POD_IP, LEADER_POD_FQDN,
#   KB_MEMBER_ADDRESSES, ...) are accepted and ignored: the agent reads the member
#   list itself.
# Also: ETCD_AGENT_URL (default http://127.0.0.1:3501), ETCD_AGENT_TOKEN_FILE,
#   ETCD_AGENT_TIMEOUT_SECONDS (the call's deadline, 1-60; default the agent's).
#
# It joins with wait: the agent adds the member (as a learner), waits inside the
# deadline for its etcd to start and catch up, and promotes it. Exit 0 only once
# the member is a started voter. If the deadline passes first, it exits 3 with
# the reason on stderr: kbagent counts that as a failure and calls again (the
# ComponentDefinition's retryPolicy), and the next call picks up where this one
# stopped, since every join reads the member list first. Exit 4: refused as unsafe
# or busy, or no quorum (call again later); 1: any other failure; 2: bad input. When kbagent runs
# it (KB_AGENT_ACTION in the environment), every failure exits 1, the reason on
# stderr: kbagent reads any non-zero exit as `failed`.
#
# How it calls the agent: the agent's own CLI when `etcd-lifecycle-agent` is on
# PATH (the agent image has node but no curl), else curl against /v1/members/join
# (same call, same answers). The kbagent route /v1.0/action has no `wait`, so
# neither path uses it.
set -u
# Beside this script; found without dirname, which a bare PATH may not have.
case "$0" in */*) here="${0%/*}" ;; *) here=. ;; esac
. "$here/member-common.sh"

read_request member-join KB_JOIN_MEMBER_POD_NAME "${KB_JOIN_MEMBER_POD_NAME:-}" "${KB_JOIN_MEMBER_POD_FQDN:-}"

if command -v etcd-lifecycle-agent >/dev/null 2>&1; then
  set -- join "$name" --wait --summary --agent "$agent"
  [ -n "$peer_url" ] && set -- "$@" --peer-url "$peer_url"
  [ -n "$timeout" ] && set -- "$@" --timeout-seconds "$timeout"
  # The CLI reads ETCD_AGENT_TOKEN_FILE itself and says why it failed on stderr.
  out=$(etcd-lifecycle-agent "$@")
  rc=$?
  case $rc in
    0) echo "$out" ;;
    3) echo "$me: $out" >&2 ;;
  esac
  finish $rc
fi

need_curl
post_agent /v1/members/join "$(request_body '"wait":true')"
case "$status" in
  200)
    echo "$name: $(field outcome "$answer") ($(field phase "$answer"), complete)"
    finish 0 ;;
  202)
    echo "$me: $name: $(field outcome "$answer") ($(field phase "$answer"), not complete: call again)" >&2
    finish 3 ;;
esac
fail_with_answer
