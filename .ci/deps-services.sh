#!/usr/bin/env bash
# Installs the storage servers the tests start (S3, GCS, Azure emulators).
set -euo pipefail
