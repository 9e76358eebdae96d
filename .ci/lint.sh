#!/usr/bin/env bash
# Static checks beyond gofmt and go vet: staticcheck over every package and
# "go mod tidy -diff" (go.mod and go.sum must already be tidy).
#
# staticcheck is installed into .tools/bin (ignored by git), outside go.mod,
# at a pinned version that builds with the project's Go; an existing binary
# of that version is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
staticcheck_version=v0.8.2
bin=$PWD/.tools/bin
staticcheck=$bin/staticcheck

if [ ! -x "$staticcheck" ] || ! "$staticcheck" -version 2>/dev/null | grep -q "${staticcheck_version#v}"; then
  echo "lint: installing staticcheck $staticcheck_version into $bin"
  mkdir -p "$bin"
  # Outside the module, so go.mod and go.sum stay untouched.
  (cd / && GOBIN="$bin" GOFLAGS=-mod=mod go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version")
fi

echo "lint: staticcheck ./..."
"$staticcheck" ./...

echo "lint: go mod tidy -diff"
if ! go mod tidy -diff; then
  echo "lint: go.mod/go.sum are not tidy; run 'go mod tidy' and commit the result" >&2
  exit 1
fi
echo "lint: clean"
