# corral — see README.md. `make test` is what CI runs.
GO      ?= go
BIN     := bin/corral
# The agent inside the sandbox is this binary: it must be static to run in any image.
export CGO_ENABLED := 0

.PHONY: all build test lint bench demo image clean

all: build

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/corral

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

test: lint build
	CGO_ENABLED=1 $(GO) test -race -timeout 30m ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
