#!/usr/bin/env bash
# Installs the packages and tools the test suite needs. Idempotent: each part
# checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download
bash .ci/deps-services.sh   # storage servers: S3, GCS and Azure emulators
bash .ci/deps-python.sh     # Debian's python3 with torch, numpy, Pillow
bash .ci/deps-multinode.sh  # ip (netns), unshare, curl for test/multinode
