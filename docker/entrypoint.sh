#!/bin/sh
# Entry point of the Sluice image (see Dockerfile). One image runs any job
# from a YAML file, which may live in object storage:
#
#   docker run IMAGE s3://bucket/configs/train.yaml     sluice run CONFIG
#   docker run -e SLUICE_CONFIG=s3://... IMAGE          the same
#   docker run IMAGE sluice ls s3://bucket/             any sluice command
#   docker run IMAGE python3 my.py                      any other program
#
# `sluice run` reads the file's kind (convert, stream, bench, serve, train);
# see `sluice run --help`.
set -eu
bin=${SLUICE_BIN:-sluice}
if [ "$#" -eq 0 ]; then
  if [ -z "${SLUICE_CONFIG:-}" ]; then
    echo "usage: IMAGE CONFIG_URL | IMAGE sluice ARGS... | IMAGE PROGRAM ARGS... (or set SLUICE_CONFIG)" >&2
    exit 2
  fi
  exec "$bin" run
fi
case "$1" in
  sluice) shift; exec "$bin" "$@" ;;
  -*) exec "$bin" run "$@" ;;
  *://* | *.yaml | *.yml) exec "$bin" run "$@" ;;
  *) exec "$@" ;;
esac
