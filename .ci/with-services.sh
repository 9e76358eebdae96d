#!/usr/bin/env bash
# Usage: .ci/with-services.sh CMD [ARG...]
#
# Starts the storage servers of .ci/services.sh (S3, GCS and Azure emulators
# on 127.0.0.1, installed by .ci/deps-services.sh if missing), runs CMD with
# their variables exported, stops them whatever happens and exits with
# CMD's status. For developers and benchmarks, e.g.
#
#   .ci/with-services.sh go test -race ./storage/...
#   .ci/with-services.sh sh -c 'sluice ls s3://$SLUICE_TEST_S3_BUCKET/'
#
# Besides the SLUICE_TEST_* variables the tests read, it exports the
# standard client variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
# AWS_REGION, S3_ENDPOINT_URL, STORAGE_EMULATOR_HOST,
# AZURE_STORAGE_CONNECTION_STRING), so that s3://, gs:// and az:// URLs
# reach the emulators. Data lives under $SLUICE_CI_DIR (a fresh temporary
# directory, removed afterwards, when unset).
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARG...]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/deps-services.sh" >&2

made_dir=
if [ -z "${SLUICE_CI_DIR:-}" ]; then
  SLUICE_CI_DIR=$(mktemp -d /tmp/sluice-services.XXXXXX)
  made_dir=$SLUICE_CI_DIR
fi
export SLUICE_CI_DIR
export AWS_EC2_METADATA_DISABLED=true

# shellcheck source=services.sh
source "$here/services.sh"
cleanup() {
  services_stop
  if [ -n "$made_dir" ]; then rm -rf "$made_dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
services_start >&2

export AWS_ACCESS_KEY_ID=$SLUICE_TEST_S3_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SLUICE_TEST_S3_SECRET_KEY
export AWS_REGION=$SLUICE_TEST_S3_REGION
export S3_ENDPOINT_URL=$SLUICE_TEST_S3_ENDPOINT
export STORAGE_EMULATOR_HOST=${SLUICE_TEST_GCS_ENDPOINT#http://}
export AZURE_STORAGE_CONNECTION_STRING=$SLUICE_TEST_AZURE_CONNSTR

set +e
"$@"
status=$?
set -e
exit "$status"
