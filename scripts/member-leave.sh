#!/bin/sh
# member-leave.sh: drop-in replacement of the KubeBlocks etcd addon's memberLeave
# script (docs/api.md §7). It runs no etcdctl: it asks this pod's etcd-lifecycle-agent
# to remove KB_LEAVE_MEMBER_POD_NAME from the cluster.
#
# Reads (as the addon's script): KB_LEAVE_MEMBER_POD_NAME (required),
#   KB_LEAVE_MEMBER_POD_FQDN (optional: peer URL {scheme}://{host}:2380, host and
#   scheme as member-join.sh makes them (member-common.sh, beside this script); it
#   also finds a member that never started, which has no name yet).
#   Other KB_* variables KubeBlocks sets (KB_LEAVE_MEMBER_POD_IP, KB_MEMBER_ADDRESSES,
#   ...) are accepted and ignored: the agent reads the member list itself.
# Also: ETCD_AGENT_URL (default http://127.0.0.1:3501), ETCD_AGENT_TOKEN_FILE,
#   ETCD_AGENT_TIMEOUT_SECONDS (the call's deadline, 1-60; default the agent's).
#
# Exit 0 when the member is gone (removed now, or already absent: a repeated call
# succeeds). The agent never forces: a removal that would leave the remaining
# voters without a healthy quorum exits 4 with the reason on stderr, as does a
# cluster without a quorum now, and kbagent calls again later (the
# ComponentDefinition's retryPolicy). 1: any other failure;
# 2: bad input. When kbagent runs it (KB_AGENT_ACTION in the environment), every
# failure exits 1, the reason on stderr.
#
# How it calls the agent: the agent's own CLI when `etcd-lifecycle-agent` is on
# PATH (the agent image has node but no curl), else curl against /v1/members/leave
# (same call, same answers).
set -u
# Beside this script; found without dirname, which a bare PATH may not have.
case "$0" in */*) here="${0%/*}" ;; *) here=. ;; esac
. "$here/member-common.sh"

read_request member-leave KB_LEAVE_MEMBER_POD_NAME "${KB_LEAVE_MEMBER_POD_NAME:-}" "${KB_LEAVE_MEMBER_POD_FQDN:-}"

if command -v etcd-lifecycle-agent >/dev/null 2>&1; then
  set -- leave "$name" --summary --agent "$agent"
  [ -n "$peer_url" ] && set -- "$@" --peer-url "$peer_url"
  [ -n "$timeout" ] && set -- "$@" --timeout-seconds "$timeout"
  # The CLI reads ETCD_AGENT_TOKEN_FILE itself and says why it failed on stderr.
  etcd-lifecycle-agent "$@"
  finish $?
fi

need_curl
post_agent /v1/members/leave "$(request_body)"
if [ "$status" = 200 ]; then
  echo "$name: $(field outcome "$answer")"
  finish 0
fi
fail_with_answer
