#!/usr/bin/env bash
# Prints the path of Versity's S3 gateway versitygw, building it first when it is missing:
# `bash scripts/versitygw.sh`. The S3 backup store tests (test/helpers/s3-server.ts) run it as the
# real S3 server, its POSIX backend serving a temporary directory.
#   versitygw v1.8.0 (Apache-2.0), built from the Go module proxy through the wrapper module
#   tools/versitygw (go.mod and go.sum only: none of its code and no binary is committed) into
#   ${VERSITYGW_CACHE_DIR:-~/.cache/etcd-lifecycle-agent}/versitygw-<version>/versitygw
# A second run builds nothing: the binary in the cache is used as it is.
# The binary's module version (`go version -m`: `mod github.com/versity/versitygw v1.8.0`) is
# checked against the wrapper's before the path is printed; anything else is a failure that says so
# (exit 1). Build output goes to stderr, so `bin="$(bash scripts/versitygw.sh)"` reads only the path.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/go-tool.sh

wrapper=tools/versitygw
[ $# -eq 0 ] || {
  echo "usage: bash scripts/versitygw.sh" >&2
  exit 2
}
version="$(go_tool_version "$wrapper" github.com/versity/versitygw)"
cache="${VERSITYGW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-lifecycle-agent}"
go_tool_build versitygw "$wrapper" github.com/versity/versitygw github.com/versity/versitygw/cmd/versitygw "$cache/versitygw-$version"
