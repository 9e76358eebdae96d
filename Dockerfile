# One image for every Sluice job: the static sluice binary, the Python client,
# torch optional. The entry point runs a YAML job (sluice run), e.g.
#
#   docker build -t sluice .                          binary + client
#   docker build -t sluice:torch --build-arg TORCH=1 .   + CPU torch, numpy, Pillow
#   docker run sluice s3://bucket/configs/convert.yaml
#   docker run -e SLUICE_CONFIG=s3://bucket/configs/train.yaml sluice:torch
#
# Credentials and endpoints come from the environment as for the CLI
# (AWS_*, S3_ENDPOINT_URL, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*).
# Mount node-local storage at /sluice for the agent socket and the cache
# (SLUICE_AGENT_DIR=/sluice/agent; datasets' local: under /sluice/cache).

# --- build: the static binary -------------------------------------------
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/sluice ./cmd/sluice \
 && /out/sluice --help >/dev/null

# --- client: the Python package (standard library only at its core) ------
FROM python:3.11-slim-bookworm AS client
COPY python /src/python
RUN pip install --no-cache-dir --no-deps --target /out/site /src/python

# --- runtime ---------------------------------------------------------------
FROM python:3.11-slim-bookworm
ARG TORCH=0
RUN if [ "$TORCH" = 1 ]; then \
      pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch \
      && pip install --no-cache-dir numpy Pillow; \
    fi
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY --from=client /out/site /usr/local/lib/sluice-python
COPY docker/entrypoint.sh /usr/local/bin/sluice-entrypoint
ENV PYTHONPATH=/usr/local/lib/sluice-python \
    SLUICE_BIN=/usr/local/bin/sluice \
    SLUICE_AGENT_DIR=/sluice/agent
RUN mkdir -p /sluice/agent /sluice/cache && chmod 0700 /sluice/agent
VOLUME ["/sluice"]
ENTRYPOINT ["/usr/local/bin/sluice-entrypoint"]
