# corral — make targets. `make test` is what CI runs (.ci/run).
GO ?= go

.PHONY: test vet bench demo generate e2e image

test: vet
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

# Benchmarks: ratios measured in one run are what count (see README, Performance).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./fill ./ring ./transport .

demo:
	$(GO) run ./cmd/corral demo

# End-to-end tests: real corral serve processes on loopback, signals, a real browser.
e2e:
	cd e2e && $(GO) test -race -count=1 ./...

# The container image: a static binary in an image built FROM scratch, run as non-root.
IMAGE ?= corral:dev
image:
	mkdir -p bin/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/image/corral ./cmd/corral
	cp Dockerfile bin/image/Dockerfile
	docker build -t $(IMAGE) bin/image

# Regenerates transport/peerpb from peer.proto: needs protoc (Debian: protobuf-compiler),
# protoc-gen-go and protoc-gen-go-grpc (see transport/peerpb/generate.go for the versions).
generate:
	$(GO) generate ./transport/...

# Side by side with otter, groupcache, Redis and a bare gRPC echo (e2e/bench, its own module):
# prints one table and writes it to e2e/bench/RESULTS.md; about 2 minutes on 2 cores. Not part
# of `make test`. Installs Debian's redis-server first when it is missing.
.PHONY: bench-compare
bench-compare:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "bench-compare: installing redis-server"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; }
	cd e2e/bench && $(GO) run . -out RESULTS.md
