# member-common.sh: what member-join.sh and member-leave.sh share; sourced, POSIX sh.
# Three decisions, each a function of the environment only (tested by
# test/integration/scripts.test.ts under bash):
#   peer_scheme        the scheme of the peer URLs this cluster uses
#   peer_host NAME FQDN the host in NAME's peer URL (PEER_ENDPOINT, else the FQDN)
#   finish CODE        exit with CODE, or with 0/1 when kbagent runs the script

# The peer URL scheme, from the configured TLS setting, first that applies:
#  1. ETCD_PEER_SCHEME (http or https): the ComponentDefinition sets it from the
#     component's TLS state, and KubeBlocks puts it in kbagent's container too.
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
