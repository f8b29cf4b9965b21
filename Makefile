# highwater's everyday targets. `make test` installs what the tests need
# (PostgreSQL server binaries, versitygw, fake-gcs-server, Azurite) into a
# cache outside the clone, starts the servers on 127.0.0.1, runs every test
# and stops the servers again.

GO          ?= go
CACHE       ?= $(or $(HIGHWATER_CACHE),$(HOME)/.cache/highwater)
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
export HIGHWATER_CACHE := $(CACHE)

.PHONY: build test deps demo bench lint clean

build:
	$(GO) build -o bin/highwater ./cmd/highwater

deps:
	scripts/deps.sh

test: deps
	scripts/test.sh

demo: deps build
	scripts/demo.sh

bench: deps build
	scripts/bench.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf bin demo
