#!/usr/bin/env bash
# Runs every fuzz target briefly, so decoders stay panic-free on CI.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${SLUICE_FUZZTIME:-5s}
for pkg in $(go list ./...); do
  for t in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz $pkg $t"
    go test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" "$pkg"
  done
done
