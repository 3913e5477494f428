# rflow — build, test, benchmark.
GO        ?= go
TOOLS     := $(CURDIR)/.tools
ANVIL     := $(TOOLS)/node_modules/.bin/anvil
# geth, the second node implementation, built from the module proxy at
# go.mod's go-ethereum version and cached per version.
GETH_VERSION := $(shell $(GO) list -m -f '{{.Version}}' github.com/ethereum/go-ethereum)
GETH      := $(TOOLS)/geth-$(GETH_VERSION)/geth
# temporal, the peer of the bench's side-by-side (BenchmarkPeerTemporal),
# built from the module proxy at a pinned CLI version (its dev server is
# Temporal Server 1.29.1); only `make bench` wants it.
TEMPORAL_VERSION := v1.5.1
TEMPORAL  := $(TOOLS)/temporal-$(TEMPORAL_VERSION)/temporal
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
TESTFLAGS ?= -timeout 25m

.PHONY: build test tools temporal bench soak lint fuzz clean

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/rflow ./cmd/rflow

# The one test command. It installs the test chain nodes first: anvil from
# npm, geth built from the module proxy.
test: tools
	RFLOW_ANVIL=$(ANVIL) RFLOW_GETH=$(GETH) $(GO) test $(TESTFLAGS) ./...

# anvil (and solc-js, to rebuild the test contract) from npm, pinned; geth
# at go.mod's go-ethereum version.
tools: $(ANVIL) $(GETH)
$(GETH):
	GOBIN=$(dir $(GETH)) $(GO) install github.com/ethereum/go-ethereum/cmd/geth@$(GETH_VERSION)
$(ANVIL):
	mkdir -p $(TOOLS)
	cd $(TOOLS) && npm install --no-audit --no-fund --silent \
		@foundry-rs/anvil-linux-amd64@1.7.1 solc@0.8.37

# Large (the whole Temporal server): built once, niced.
temporal: $(TEMPORAL)
$(TEMPORAL):
	GOBIN=$(dir $(TEMPORAL)) nice $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)

bench: tools temporal
	RFLOW_ANVIL=$(ANVIL) RFLOW_GETH=$(GETH) RFLOW_TEMPORAL=$(TEMPORAL) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./bench/...

soak: tools
	RFLOW_ANVIL=$(ANVIL) RFLOW_GETH=$(GETH) RFLOW_SOAK=large $(GO) test -run 'Soak|Outage' -timeout 60m -v ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Run every fuzz target briefly (FUZZTIME each).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list 'Fuzz.*' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

clean:
	rm -rf bin $(TOOLS)
