# The two commands the README gives:
#   make quickstart   run the main job on an embedded local store
#   make test         run every test (what CI runs)
#   make wheel        build dist/sluice-<version>-py3-none-manylinux2014_x86_64.whl
#                     (the Python package with the static sluice binary inside)
GO ?= go

.PHONY: build quickstart test bench wheel multinode

build:
	$(GO) build -o bin/sluice ./cmd/sluice

quickstart:
	$(GO) run ./cmd/sluice quickstart

test:
	bash .ci/test.sh

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

wheel:
	bash python/build-wheel.sh dist

# The multi-host harness (root: network namespaces); ends with a line of
# figures. ARGS=--big for the larger run.
multinode:
	bash test/multinode/run.sh $(ARGS)
