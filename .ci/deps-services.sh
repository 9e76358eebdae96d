#!/usr/bin/env bash
# Installs the storage servers the tests start (S3, GCS, Azure emulators):
#   versitygw (S3, posix backend)  -> .tools/versitygw-<version>/versitygw
#   fake-gcs-server (GCS)          -> .tools/fake-gcs-server-<version>/fake-gcs-server
#   Azurite (Azure Blob, npm)      -> .ci/azurite/node_modules (npm ci, pinned by
#                                     .ci/azurite/package-lock.json)
# The Go tools are built with `go install pkg@version`, outside the
# project's go.mod. Each part is skipped when already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

VERSITYGW_VERSION=v1.8.0
FAKE_GCS_VERSION=v1.56.1

go_tool() { # go_tool NAME PACKAGE VERSION
  local dir="$root/.tools/$1-$3"
  if [ -x "$dir/$1" ]; then
    echo "deps-services: $1 $3 already installed"
    return
  fi
  echo "deps-services: installing $1 $3"
  # A private GOBIN and no project flags: the tools never touch go.mod.
  (cd "$root" && GOFLAGS= GOBIN="$dir.tmp" go install "$2@$3")
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
}
go_tool versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION" &
vgw=$!
go_tool fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION" &
fgcs=$!

# Azurite needs Node.js and npm; services.sh creates buckets with curl
# (SigV4-signed for S3) and openssl (the Azure shared-key signature).
# Install Debian's packages for whichever is missing.
missing=()
for tool in node:nodejs npm:npm curl:curl openssl:openssl; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps-services: installing ${missing[*]} from apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
az=.ci/azurite
if [ -x "$az/node_modules/.bin/azurite-blob" ] &&
  cmp -s "$az/package-lock.json" "$az/node_modules/.package-lock.json.sluice" 2>/dev/null; then
  echo "deps-services: azurite already installed"
else
  echo "deps-services: npm ci in $az"
  (cd "$az" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$az/package-lock.json" "$az/node_modules/.package-lock.json.sluice"
fi

wait "$vgw"
wait "$fgcs"
