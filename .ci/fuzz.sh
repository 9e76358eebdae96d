#!/usr/bin/env bash
# Runs every fuzz target briefly, so decoders stay panic-free on CI.
#
# The budget is a number of executions, not a duration: with a duration,
# Go 1.26's fuzz coordinator can report a spurious "context deadline
# exceeded" when the deadline races a busy worker on a loaded machine
# (go.dev/issue/75804, fixed in Go 1.27). A count has no such deadline.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzzcount=${SLUICE_FUZZCOUNT:-1000x}
n=0
for pkg in $(go list ./...); do
  for t in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz $pkg $t ($fuzzcount)"
    go test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzzcount" -parallel=2 -timeout=5m "$pkg"
    n=$((n + 1))
  done
done
# The libjpeg-turbo decoder's targets exist only with its build tag.
for pkg in $(go list -tags libjpeg ./vision/...); do
  for t in $(go test -tags libjpeg -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz -tags libjpeg $pkg $t ($fuzzcount)"
    go test -tags libjpeg -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzzcount" -parallel=2 -timeout=5m "$pkg"
    n=$((n + 1))
  done
done
echo "fuzz: $n targets passed"
