#!/usr/bin/env bash
# Runs the Python client's tests with Debian's interpreter (it owns the
# python3-torch/numpy/pil packages): builds cmd/sluice, installs the package
# from ./python offline (no build isolation) into a scratch directory, and
# runs the unittest suite against that installed copy.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
PY=/usr/bin/python3
base=${SLUICE_CI_DIR:-${TMPDIR:-/tmp}}
mkdir -p "$base"
work=$(mktemp -d "$base/python.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Built as `make wheel` builds it, so that the wheel test reuses the build.
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o "$work/bin/sluice" ./cmd/sluice
# Build out of tree so the checkout stays clean.
cp -r python "$work/src"
"$PY" -m pip install --quiet --no-build-isolation --no-deps --no-index \
  --target "$work/site" "$work/src"

export PYTHONPATH="$work/site"
export SLUICE_BIN="$work/bin/sluice"
export SLUICE_TEST_INSTALLED=1
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
cd "$root/python/tests"
"$PY" -c 'import sluice, sys; assert sluice.__file__.startswith(sys.argv[1]), sluice.__file__' "$work/site"
"$PY" -W ignore::ResourceWarning -m unittest discover -s . -p 'test_*.py' -v
