#!/usr/bin/env bash
# Installs what the agent, its tests and its quick start need on a fresh Debian
# machine: etcd 3.4, busybox-static and Prometheus (promtool) from Debian's packages (when missing), etcd 3.5, 3.6 and
# 3.7, KubeBlocks' kbagent and the S3 server versitygw built from the Go module proxy when Go is here
# (scripts/etcd.sh, scripts/kbagent.sh, scripts/versitygw.sh; nothing when already built),
# the project's npm dependencies exactly as package-lock.json pins them (npm ci, its tree kept once
# per machine), then builds dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "etcd is missing: run as root, or apt-get install -y etcd-server etcd-client" >&2
    exit 1
  fi
  echo "setup: installing etcd from Debian (etcd-server, etcd-client)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >/dev/null
  # Debian's package may start a system etcd on 2379; the local clusters use their own ports.
fi

# etcd 3.5–3.7: the tests need them (scripts/test.sh fails without them); the quick start runs
# Debian's 3.4 on a machine without Go.
if command -v go >/dev/null 2>&1; then
  for v in 3.5 3.6 3.7; do
    bash scripts/etcd.sh "$v" >/dev/null || echo "setup: etcd $v could not be built (see above)" >&2
  done
  # The kbagent end-to-end test runs the real kbagent, built from source when missing.
  bash scripts/kbagent.sh >/dev/null || echo "setup: kbagent could not be built (see above)" >&2
  # The backup tests store into a real S3 server, versitygw, built from source when missing.
  bash scripts/versitygw.sh >/dev/null || echo "setup: versitygw could not be built (see above)" >&2
else
  echo "setup: no Go on this machine: etcd 3.5, 3.6 and 3.7 and kbagent are not built (the tests need them; the quick start runs Debian's 3.4)" >&2
fi

# The etcd start script kube-inject writes runs under Debian's static busybox in the pod (copied from
# the agent's image); the tests run it under the same busybox, with no PATH (test/helpers/prepare-pods.ts).
if [ ! -x /bin/busybox ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: busybox is missing (the start script tests need it): run as root, or apt-get install -y busybox-static" >&2
  else
    echo "setup: installing busybox-static from Debian"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
  fi
fi

# Only the alert tests need Prometheus and promtool: without root, say so and go on.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: prometheus is missing (the alert tests need it): run as root, or apt-get install -y prometheus" >&2
  else
    echo "setup: installing Prometheus and promtool from Debian (prometheus)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
    # Debian's package may start a system Prometheus on 9090; the tests run their own on a free port.
  fi
fi

# npm ci only when the lock file changed since the last install, from the tree kept on this
# machine when there is one (scripts/npm-ci.sh).
bash scripts/npm-ci.sh

echo "setup: building"
npm run --silent build
