#!/usr/bin/env bash
# Multi-host harness (see harness.py): simulated hosts as network namespaces
# on a bridge, each with its own sluice agent and cache, the real S3 server on
# a host of its own, torchrun (c10d, gloo) across them. Needs root, iproute2,
# util-linux (unshare), curl, Debian's python3-torch and .tools/versitygw
# (.ci/deps.sh installs them). Extra arguments go to main.py, e.g. --big.
#
#   bash test/multinode/run.sh            the CI size (3 hosts × 2 ranks × 2 workers)
#   bash test/multinode/run.sh --big      the larger run for the figures
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
if [ "$(id -u)" != 0 ]; then
  echo "multinode: needs root (network namespaces)" >&2
  exit 1
fi
for tool in ip unshare curl hostname; do
  command -v "$tool" >/dev/null || { echo "multinode: $tool missing (run .ci/deps.sh)" >&2; exit 1; }
done
[ -x .tools/versitygw-v1.8.0/versitygw ] || { echo "multinode: versitygw missing (run .ci/deps-services.sh)" >&2; exit 1; }
base=${SLUICE_CI_DIR:-${TMPDIR:-/tmp}}
mkdir -p "$base"
work=$(mktemp -d "$base/multinode.XXXXXX")
prefix="slmn$$"
cleanup() {
  # main.py removes what it made; this catches a harness killed midway.
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  if [ "${SLUICE_MN_KEEP:-}" != 1 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
go build -o "$work/bin/sluice" ./cmd/sluice
status=0
/usr/bin/python3 -u test/multinode/main.py --sluice "$work/bin/sluice" --work "$work" --prefix "$prefix" "$@" || status=$?
if [ "$status" != 0 ]; then
  echo "multinode: logs of the failed run:" >&2
  for f in "$work"/*.log; do
    [ -f "$f" ] || continue
    echo "--- $f (last 20 lines)" >&2
    tail -n 20 "$f" >&2
  done
fi
exit "$status"
