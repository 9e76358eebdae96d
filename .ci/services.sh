# Sourced by .ci/test.sh (and .ci/with-services.sh): defines services_start
# and services_stop, which start and stop the real servers the storage tests
# use (127.0.0.1 only) and export the variables the tests read to find them.
#
# Servers (installed by .ci/deps-services.sh):
#   S3     versitygw, posix backend      SLUICE_TEST_S3_ENDPOINT, _BUCKET, _REGION,
#                                        _ACCESS_KEY, _SECRET_KEY (the region is
#                                        sluice-local-1, not a default, so that
#                                        region discovery is tested)
#   GCS    fake-gcs-server, HTTP, memory  SLUICE_TEST_GCS_ENDPOINT, _BUCKET
#   Azure  Azurite, blob service only    SLUICE_TEST_AZURE_CONNSTR, _CONTAINER
#
# Everything (data, logs, pid files) lives under $SLUICE_CI_DIR, which must
# be set. services_start fails, after stopping whatever it started, when a
# server does not answer within SLUICE_SERVICE_TIMEOUT seconds (default 60).
# services_stop is idempotent and safe after a partial start.

_svc_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_svc_pids=()

# _svc_free_port prints a TCP port on 127.0.0.1 that nothing listens on,
# below the kernel's ephemeral range (so no outgoing connection holds it).
_svc_free_port() {
  local p i lo
  lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  for i in $(seq 1 100); do
    p=$((10000 + RANDOM % (lo - 10000)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "services: no free port found" >&2
  return 1
}

# _svc_wait NAME URL PID: waits until URL answers any HTTP status.
_svc_wait() {
  local name=$1 url=$2 pid=$3
  local deadline=$((SECONDS + ${SLUICE_SERVICE_TIMEOUT:-60}))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "services: $name exited during start-up; its log ($SLUICE_CI_DIR/$name.log):" >&2
      tail -n 30 "$SLUICE_CI_DIR/$name.log" >&2 || true
      return 1
    fi
    if curl -s -o /dev/null --max-time 2 "$url"; then
      return 0
    fi
    sleep 0.2
  done
  echo "services: $name did not answer at $url within ${SLUICE_SERVICE_TIMEOUT:-60}s; its log:" >&2
  tail -n 30 "$SLUICE_CI_DIR/$name.log" >&2 || true
  return 1
}

# _svc_spawn NAME CMD...: starts CMD in the background with its output in
# $SLUICE_CI_DIR/NAME.log and records its pid.
_svc_spawn() {
  local name=$1
  shift
  "$@" >"$SLUICE_CI_DIR/$name.log" 2>&1 </dev/null &
  local pid=$!
  _svc_pids+=("$pid")
  echo "$pid" >"$SLUICE_CI_DIR/$name.pid"
  _svc_last_pid=$pid
}

_svc_start_s3() {
  local bin="$_svc_root/.tools/versitygw-v1.8.0/versitygw"
  [ -x "$bin" ] || { echo "services: $bin missing; run .ci/deps-services.sh" >&2; return 1; }
  local port
  port=$(_svc_free_port) || return 1
  mkdir -p "$SLUICE_CI_DIR/s3/data"
  export SLUICE_TEST_S3_ENDPOINT="http://127.0.0.1:$port"
  export SLUICE_TEST_S3_BUCKET=sluice-test
  export SLUICE_TEST_S3_REGION=sluice-local-1
  export SLUICE_TEST_S3_ACCESS_KEY=sluiceaccess
  export SLUICE_TEST_S3_SECRET_KEY=sluicesecret
  _svc_spawn s3 "$bin" --access "$SLUICE_TEST_S3_ACCESS_KEY" --secret "$SLUICE_TEST_S3_SECRET_KEY" \
    --region "$SLUICE_TEST_S3_REGION" --port "127.0.0.1:$port" --keep-alive --quiet \
    posix "$SLUICE_CI_DIR/s3/data"
  _svc_wait s3 "$SLUICE_TEST_S3_ENDPOINT/" "$_svc_last_pid" || return 1
  local code
  code=$(curl -s -o "$SLUICE_CI_DIR/s3/create.out" -w '%{http_code}' -X PUT \
    --aws-sigv4 "aws:amz:$SLUICE_TEST_S3_REGION:s3" \
    -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
    --user "$SLUICE_TEST_S3_ACCESS_KEY:$SLUICE_TEST_S3_SECRET_KEY" \
    "$SLUICE_TEST_S3_ENDPOINT/$SLUICE_TEST_S3_BUCKET")
  if [ "$code" != 200 ]; then
    echo "services: creating S3 bucket $SLUICE_TEST_S3_BUCKET: HTTP $code" >&2
    cat "$SLUICE_CI_DIR/s3/create.out" >&2
    return 1
  fi
  echo "services: S3 (versitygw) at $SLUICE_TEST_S3_ENDPOINT, bucket $SLUICE_TEST_S3_BUCKET"
}

_svc_start_gcs() {
  local bin="$_svc_root/.tools/fake-gcs-server-v1.56.1/fake-gcs-server"
  [ -x "$bin" ] || { echo "services: $bin missing; run .ci/deps-services.sh" >&2; return 1; }
  local port
  port=$(_svc_free_port) || return 1
  # The memory backend: the filesystem one cannot hold "a" and "a/b" at
  # once, which real GCS can.
  mkdir -p "$SLUICE_CI_DIR/gcs"
  export SLUICE_TEST_GCS_ENDPOINT="http://127.0.0.1:$port"
  export SLUICE_TEST_GCS_BUCKET=sluice-test
  _svc_spawn gcs "$bin" -scheme http -host 127.0.0.1 -port "$port" \
    -external-url "$SLUICE_TEST_GCS_ENDPOINT" -public-host "127.0.0.1:$port" \
    -backend memory -log-level warn
  _svc_wait gcs "$SLUICE_TEST_GCS_ENDPOINT/storage/v1/b" "$_svc_last_pid" || return 1
  local code
  code=$(curl -s -o "$SLUICE_CI_DIR/gcs/create.out" -w '%{http_code}' -X POST \
    -H 'Content-Type: application/json' -d "{\"name\":\"$SLUICE_TEST_GCS_BUCKET\"}" \
    "$SLUICE_TEST_GCS_ENDPOINT/storage/v1/b?project=sluice-test")
  if [ "$code" != 200 ]; then
    echo "services: creating GCS bucket $SLUICE_TEST_GCS_BUCKET: HTTP $code" >&2
    cat "$SLUICE_CI_DIR/gcs/create.out" >&2
    return 1
  fi
  echo "services: GCS (fake-gcs-server) at $SLUICE_TEST_GCS_ENDPOINT, bucket $SLUICE_TEST_GCS_BUCKET"
}

# Azurite's fixed development account (public, documented by Microsoft).
_svc_az_account=devstoreaccount1
_svc_az_key='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

# _svc_az_create_container ENDPOINT NAME: creates a container with a
# SharedKey-signed request (no Azure tools needed, only openssl).
_svc_az_create_container() {
  local endpoint=$1 name=$2 version=2021-12-02
  local date sts sig code
  date=$(LC_ALL=C TZ=GMT date '+%a, %d %b %Y %H:%M:%S GMT')
  # String to sign: verb, 11 empty standard headers, canonical x-ms-
  # headers, canonical resource.
  sts=$(printf 'PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:%s\nx-ms-version:%s\n/%s/%s/%s\nrestype:container' \
    "$date" "$version" "$_svc_az_account" "$_svc_az_account" "$name")
  sig=$(printf '%s' "$sts" | openssl dgst -sha256 -mac HMAC \
    -macopt "hexkey:$(printf '%s' "$_svc_az_key" | base64 -d | od -An -vtx1 | tr -d ' \n')" -binary | base64 -w0)
  code=$(curl -s -o "$SLUICE_CI_DIR/azure/create.out" -w '%{http_code}' -X PUT \
    -H "x-ms-date: $date" -H "x-ms-version: $version" -H 'Content-Length: 0' \
    -H "Authorization: SharedKey $_svc_az_account:$sig" \
    "$endpoint/$name?restype=container")
  if [ "$code" != 201 ] && [ "$code" != 409 ]; then
    echo "services: creating Azure container $name: HTTP $code" >&2
    cat "$SLUICE_CI_DIR/azure/create.out" >&2
    return 1
  fi
}

_svc_start_azure() {
  local bin="$_svc_root/.ci/azurite/node_modules/.bin/azurite-blob"
  [ -x "$bin" ] || { echo "services: $bin missing; run .ci/deps-services.sh" >&2; return 1; }
  local port
  port=$(_svc_free_port) || return 1
  mkdir -p "$SLUICE_CI_DIR/azure/data"
  local endpoint="http://127.0.0.1:$port/$_svc_az_account"
  _svc_spawn azure "$bin" --blobHost 127.0.0.1 --blobPort "$port" \
    --location "$SLUICE_CI_DIR/azure/data" --silent --skipApiVersionCheck --disableTelemetry
  _svc_wait azure "$endpoint?comp=list" "$_svc_last_pid" || return 1
  export SLUICE_TEST_AZURE_CONTAINER=sluice-test
  export SLUICE_TEST_AZURE_CONNSTR="DefaultEndpointsProtocol=http;AccountName=$_svc_az_account;AccountKey=$_svc_az_key;BlobEndpoint=$endpoint;"
  _svc_az_create_container "$endpoint" "$SLUICE_TEST_AZURE_CONTAINER" || return 1
  echo "services: Azure Blob (Azurite) at $endpoint, container $SLUICE_TEST_AZURE_CONTAINER"
}

# services_start starts every server and exports SLUICE_TEST_* for them.
services_start() {
  if [ -z "${SLUICE_CI_DIR:-}" ]; then
    echo "services: SLUICE_CI_DIR is not set" >&2
    return 1
  fi
  mkdir -p "$SLUICE_CI_DIR"
  # Servers start in turn: on 2 cores a parallel start gains little and
  # makes the logs of a failure harder to read.
  local svc
  for svc in s3 gcs azure; do
    if ! _svc_try "$svc"; then
      services_stop
      return 1
    fi
  done
}

# _svc_try NAME: starts a server, trying again on a fresh port when the
# port was taken between choosing and binding it.
_svc_try() {
  local attempt
  for attempt in 1 2 3; do
    if "_svc_start_$1"; then
      return 0
    fi
    if ! grep -q 'address already in use' "$SLUICE_CI_DIR/$1.log" 2>/dev/null; then
      return 1
    fi
    echo "services: $1: port taken, trying another" >&2
  done
  return 1
}

# services_stop stops every server services_start started. It always
# returns 0 so that it can run from an EXIT trap.
services_stop() {
  local pid
  for pid in "${_svc_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${_svc_pids[@]}"; do
    # Give each a moment to exit cleanly, then insist.
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  _svc_pids=()
  return 0
}
