#!/usr/bin/env bash
# Tools of the multi-host harness (test/multinode): iproute2 (ip netns,
# veth, bridge), util-linux (unshare), curl and hostname. Quick when present.
set -euo pipefail
missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v unshare >/dev/null || missing+=(util-linux)
command -v curl >/dev/null || missing+=(curl)
command -v hostname >/dev/null || missing+=(hostname)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
