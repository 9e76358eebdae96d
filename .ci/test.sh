#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what the tests
# need, starts the real servers they use (on 127.0.0.1 only), runs the Go and
# Python suites, and stops the servers again, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Everything the tests start lives under one scratch directory.
export SLUICE_CI_DIR=${SLUICE_CI_DIR:-$(mktemp -d /tmp/sluice-ci.XXXXXX)}
# In CI every server-backed test must run: a missing server is a failure,
# not a skip.
export SLUICE_REQUIRE_SERVICES=${SLUICE_REQUIRE_SERVICES:-1}
# Never reach a cloud metadata service or a non-loopback address.
export AWS_EC2_METADATA_DISABLED=true

step() { printf '\n== %s ==\n' "$*"; }

step "install dependencies"
bash .ci/deps.sh

step "start services"
# shellcheck source=/dev/null
source .ci/services.sh
trap services_stop EXIT
services_start

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^tools/') || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "lint (staticcheck, go mod tidy -diff)"
bash .ci/lint.sh

step "go test -race"
go test -race -count=1 -timeout 20m ./...
# The libjpeg-turbo decoder (cgo, behind the libjpeg build tag).
go test -race -count=1 -tags libjpeg ./vision/...
# The order code once more on nprand's scalar path, which a CPU with
# AVX-512 IFMA (where the kernels run) would otherwise never test.
GODEBUG=cpu.avx512ifma=off go test -count=1 ./nprand/... ./shuffle/... ./plan/...

step "fuzz (short)"
bash .ci/fuzz.sh

step "python"
bash .ci/python.sh

step "multinode (hosts as network namespaces, torchrun across them)"
bash test/multinode/run.sh

echo
echo "all tests passed"
