#!/usr/bin/env bash
# Installs the packages and tools the test suite needs. Idempotent: each part
# checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download
bash .ci/deps-services.sh   # storage servers: S3, GCS and Azure emulators
bash .ci/deps-python.sh     # Debian's python3 with torch, numpy, Pillow
bash .ci/deps-multinode.sh  # ip (netns), unshare, curl for test/multinode
# libjpeg-turbo's headers for vision/libjpeg (go test -tags libjpeg).
if [ ! -f /usr/include/jpeglib.h ]; then
  SUDO=; if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libjpeg62-turbo-dev
fi
