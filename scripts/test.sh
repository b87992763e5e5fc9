#!/usr/bin/env bash
# The whole suite: setup, then type check, lint and every jest test (unit and
# integration against real local etcd processes). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npm test
