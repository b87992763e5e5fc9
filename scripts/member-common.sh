# member-common.sh: what member-join.sh and member-leave.sh share; sourced, POSIX sh.
# Three decisions, each a function of the environment only (tested by
# test/unit/member-common.test.ts under bash):
#   peer_scheme        the scheme of the peer URLs this cluster uses
#   peer_host NAME FQDN the host in NAME's peer URL (PEER_ENDPOINT, else the FQDN)
#   finish CODE        exit with CODE, or with 0/1 when kbagent runs the script
# and the steps both scripts take around their one call to the agent (tested with
# the scripts themselves, test/integration/scripts.test.ts):
#   read_request ME VARIABLE NAME FQDN   checks the input; sets me, name, timeout, agent, peer_url
#   need_curl                            exits 1 unless curl is on PATH
#   post_agent PATH BODY                 POSTs BODY (JSON) to the agent; sets status, answer (a file)
#   request_body [EXTRA]                 the JSON body: name, peerURLs, timeoutSeconds, and EXTRA
#   fail_with_answer                     says the agent's error on stderr and exits as the CLI would

# The peer URL scheme, from the configured TLS setting, first that applies:
#  1. ETCD_PEER_SCHEME (http or https), where it is set: a var of the definition
#     these scripts serve reaches kbagent's container, where they run.
#  2. The KubeBlocks etcd addon's own rule when its TLS_ENABLED is set: https when
#     TLS_ENABLED and PEER_TLS are both "true" (as its start.sh configures etcd).
#  3. https when ETCD_AGENT_PEER_URL_TEMPLATE is an https template (as the agent's
#     kbagent route decides).
#  4. http.
# Prints the scheme; returns 1 (printing nothing) when ETCD_PEER_SCHEME is neither.
peer_scheme() {
  case "${ETCD_PEER_SCHEME:-}" in
    [Hh][Tt][Tt][Pp][Ss]) echo https; return 0 ;;
    [Hh][Tt][Tt][Pp]) echo http; return 0 ;;
    '') ;;
    *) return 1 ;;
  esac
  if [ -n "${TLS_ENABLED:-}" ]; then
    if [ "$TLS_ENABLED" = true ] && [ "${PEER_TLS:-}" = true ]; then echo https; else echo http; fi
    return 0
  fi
  case "${ETCD_AGENT_PEER_URL_TEMPLATE:-}" in
    [Hh][Tt][Tt][Pp][Ss]://*) echo https ;;
    *) echo http ;;
  esac
}

# The host of NAME's peer URL. In the addon's LoadBalancer / host-network mode,
# PEER_ENDPOINT lists "pod" or "pod:address" entries, comma-separated: the entry of
# exactly NAME gives its address (a bare "pod" entry is the host itself), as the
# addon's start.sh advertises it. Otherwise, and for a pod it does not list, FQDN
# (which may be empty: then the agent derives the peer URL from its template).
peer_host() {
  if [ -n "${PEER_ENDPOINT:-}" ]; then
    _saved_ifs=$IFS
    IFS=,
    set -f
    for _entry in $PEER_ENDPOINT; do
      case "$_entry" in
        "$1") IFS=$_saved_ifs; set +f; echo "$1"; return 0 ;;
        "$1":?*) IFS=$_saved_ifs; set +f; echo "${_entry#*:}"; return 0 ;;
      esac
    done
    IFS=$_saved_ifs
    set +f
  fi
  echo "$2"
}

# Exits with CODE (0 done, 1 failure, 2 bad input, 3 in progress, 4 unsafe or busy), or,
# when kbagent runs the script (its container's KB_AGENT_ACTION is in the environment),
# with 0 or 1: kbagent reads every non-zero exit of an exec action as `failed`, so the
# finer codes would only look like different failures. The reason is on stderr either way.
finish() {
  if [ -n "${KB_AGENT_ACTION:-}" ] && [ "$1" -ne 0 ]; then exit 1; fi
  exit "$1"
}

# Checks the script's input and sets what the call needs: me (the script's name
# for messages), name, timeout (ETCD_AGENT_TIMEOUT_SECONDS, may be empty), agent
# (ETCD_AGENT_URL), peer_url ({scheme}://{host}:2380, empty without a host: the
# agent then derives it from its template). VARIABLE names the KB_* variable
# that gave NAME, for the message when it is missing. Bad input exits 2.
read_request() {
  me=$1
  name=$3
  timeout="${ETCD_AGENT_TIMEOUT_SECONDS:-}"
  agent="${ETCD_AGENT_URL:-http://127.0.0.1:3501}"
  if [ -z "$name" ]; then
    echo "$me: $2 is not set" >&2
    finish 2
  fi
  case "$timeout" in
    '' | [1-9] | [1-5][0-9] | 60) ;;
    *) echo "$me: ETCD_AGENT_TIMEOUT_SECONDS=$timeout is not a whole number from 1 to 60" >&2; finish 2 ;;
  esac
  scheme=$(peer_scheme) || { echo "$me: ETCD_PEER_SCHEME=$ETCD_PEER_SCHEME is neither http nor https" >&2; finish 2; }
  host=$(peer_host "$name" "$4")
  peer_url=""
  [ -n "$host" ] && peer_url="$scheme://$host:2380"
  return 0
}

# Exits 1 (saying why) unless curl is on PATH: the scripts' way to the agent
# when its CLI is not there.
need_curl() {
  if ! command -v curl >/dev/null 2>&1; then
    echo "$me: neither etcd-lifecycle-agent nor curl is on PATH; cannot call the agent" >&2
    finish 1
  fi
}

# Names and URLs are DNS names (the agent validates them); escape what would break JSON anyway.
json_string() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
# The first string value of FIELD in the JSON file FILE.
field() { sed -n "s/.*\"$1\" *: *\"\\([^\"]*\\)\".*/\\1/p" "$2" | head -n 1; }

# The request's JSON body: name, peerURLs (when peer_url is set), timeoutSeconds
# (when timeout is set), and EXTRA (e.g. `"wait":true`) when given.
request_body() {
  _body="{\"name\":$(json_string "$name")"
  [ -n "${1:-}" ] && _body="$_body,$1"
  [ -n "$peer_url" ] && _body="$_body,\"peerURLs\":[$(json_string "$peer_url")]"
  [ -n "$timeout" ] && _body="$_body,\"timeoutSeconds\":$timeout"
  printf '%s}' "$_body"
}

# POSTs BODY to the agent's PATH with curl, the token (ETCD_AGENT_TOKEN_FILE)
# through curl's config on stdin, never on its command line (ps shows that).
# Sets status (the HTTP status) and answer (a file holding the body, removed on
# exit). Exits 1 when the agent cannot be reached.
post_agent() {
  answer=$(mktemp) || finish 1
  trap 'rm -f "$answer"' EXIT
  _token=""
  if [ -n "${ETCD_AGENT_TOKEN_FILE:-}" ]; then
    _token=$(cat "$ETCD_AGENT_TOKEN_FILE") || { echo "$me: cannot read ETCD_AGENT_TOKEN_FILE" >&2; finish 1; }
  fi
  status=$(
    { [ -n "$_token" ] && printf 'header = %s\n' "$(json_string "Authorization: Bearer $_token")"; } |
      curl -s -K - -o "$answer" -w '%{http_code}' --max-time "$(( ${timeout:-60} + 5 ))" \
        -X POST -H 'Content-Type: application/json' --data "$2" "${agent%/}$1"
  )
  _rc=$?
  if [ $_rc -ne 0 ]; then
    echo "$me: cannot reach the agent at $agent (curl exit code $_rc)" >&2
    finish 1
  fi
}

# The agent answered an error: says it on stderr (its code and message) and
# exits as the CLI does: 4 for a refusal to call again later (unsafe, busy, or
# unavailable for want of a quorum, whose details carry healthyVoters), else 1.
fail_with_answer() {
  _code=$(field code "$answer")
  echo "$me: ${_code:-HTTP $status}: $(field message "$answer")" >&2
  case "$_code" in
    unsafe | busy) finish 4 ;;
    unavailable) if grep -q '"healthyVoters"' "$answer"; then finish 4; fi; finish 1 ;;
    *) finish 1 ;;
  esac
}
