# corral — make targets. `make test` is what CI runs (.ci/run).
GO ?= go

.PHONY: test vet bench demo generate

test: vet
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

# Benchmarks: ratios measured in one run are what count (see README, Performance).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./fill ./ring ./transport .

demo:
	$(GO) run ./cmd/corral demo

# Regenerates transport/peerpb from peer.proto: needs protoc (Debian: protobuf-compiler),
# protoc-gen-go and protoc-gen-go-grpc (see transport/peerpb/generate.go for the versions).
generate:
	$(GO) generate ./transport/...
