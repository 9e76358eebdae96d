#!/usr/bin/env bash
# Installs Debian's python3 with torch, numpy and Pillow for the client tests.
set -euo pipefail
