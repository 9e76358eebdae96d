# The two commands the README gives:
#   make quickstart   run the main job on an embedded local store
#   make test         run every test (what CI runs)
GO ?= go

.PHONY: build quickstart test bench multinode

build:
	$(GO) build -o bin/sluice ./cmd/sluice

quickstart:
	$(GO) run ./cmd/sluice quickstart

test:
	bash .ci/test.sh

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# The multi-host harness (root: network namespaces); ends with a line of
# figures. ARGS=--big for the larger run.
multinode:
	bash test/multinode/run.sh $(ARGS)
