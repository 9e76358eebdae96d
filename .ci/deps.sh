#!/usr/bin/env bash
# Installs the packages and tools the test suite needs. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download
